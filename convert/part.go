package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Split conversions (ckpt convert --part I/N): which output files each
// process writes, and part 0's wait for the others' before the index.

// Part is one process's share of a conversion split over Count processes
// (ckpt convert --part I/N): process Index writes only its own output
// files, chosen by a deterministic plan every process computes alike, and
// process 0 writes the index (.metadata, index.json) once the other
// processes' files exist. The zero Part is a whole conversion.
type Part struct{ Index, Count int }

// whole reports whether p is a whole (unsplit) conversion.
func (p Part) whole() bool { return p.Count <= 1 }

// mine reports whether output file i (of a list of files) is this part's:
// files go round-robin, file i to part i mod Count.
func (p Part) mine(i int) bool { return p.whole() || i%p.Count == p.Index }

// WithPart makes Convert write only part p of a sharded output (DCP with
// several ranks, or sharded safetensors or .pth): see Part. Part 0 waits
// up to WithPartWait for the others' files before writing the index.
func WithPart(p Part) Option { return func(c *options) { c.dcpOpt.part = p } }

// DefaultPartWait is how long part 0 waits for the other parts' files.
const DefaultPartWait = time.Hour

// WithPartWait sets how long part 0 waits for the other parts' files
// before it writes the index (default DefaultPartWait); past it, Convert
// fails with ErrPartMissing.
func WithPartWait(d time.Duration) Option { return func(c *options) { c.dcpOpt.partWait = d } }

// ErrPartMissing reports that part 0 gave up waiting for a file another
// part writes.
var ErrPartMissing = errors.New("convert: another part's output is missing")

// skips reports whether file i of the outputs (n files, then the index at
// i == n) is another part's to write.
func (p Part) skips(i, n int) bool {
	if p.whole() {
		return false
	}
	if i == n {
		return p.Index != 0
	}
	return !p.mine(i)
}

// own returns the files of finals this part writes.
func (p Part) own(finals []string) []string {
	var out []string
	for i, f := range finals {
		if !p.skips(i, len(finals)) {
			out = append(out, f)
		}
	}
	return out
}

// checkPart refuses --part for outputs whose parts cannot be planned
// alone: .pth shards share storages, so their sizes need the others.
func (c *config) checkPart(l *layout) error {
	if !c.dcpOpt.part.whole() && !l.out.splits() {
		return fmt.Errorf("%w: --part splits safetensors and DCP outputs, not %s", ErrOption, l.format)
	}
	return nil
}

// waitOtherParts waits, in part 0, for the shards the other parts write
// (targets[i] of shard i, with the sizes shardSizes plans) before the
// index is committed.
func (c *config) waitOtherParts(ctx context.Context, pl *plan, l *layout, groups [][]*item, targets []string) error {
	p := c.dcpOpt.part
	if p.whole() {
		return nil
	}
	sizes, err := l.out.sizes(c, pl, groups)
	if err != nil {
		return err
	}
	var files []string
	var want []int64
	for i, f := range targets {
		if p.skips(i, len(targets)) {
			files, want = append(files, f), append(want, sizes[i])
		}
	}
	return c.waitFor(ctx, files, want)
}

// validatePart checks the Part option.
func (c *config) validatePart() error {
	p := c.dcpOpt.part
	if p.Count < 0 || p.Count > 0 && (p.Index < 0 || p.Index >= p.Count) {
		return fmt.Errorf("%w: part %d of %d", ErrOption, p.Index, p.Count)
	}
	if _, ok := c.dest.(SizeDestination); !p.whole() && c.dest != nil && !ok {
		return fmt.Errorf("%w: --part needs a destination that reports sizes (convert.SizeDestination)", ErrOption)
	}
	return nil
}

// waitFor waits until every file exists with its size (want[i] < 0: any
// size), polling, up to the part wait.
func (c *config) waitFor(ctx context.Context, files []string, want []int64) error {
	wait := c.dcpOpt.partWait
	if wait == 0 {
		wait = DefaultPartWait
	}
	deadline := time.Now().Add(wait)
	poll := 10 * time.Millisecond // doubling up to a second
	for i, f := range files {
		for {
			size, ok, err := c.outSize(ctx, f)
			if err != nil {
				return err
			}
			if ok && (want[i] < 0 || size == want[i]) {
				break
			}
			if ok && size > want[i] {
				return fmt.Errorf("%w: %s has %d bytes, the plan says %d (another conversion's output?)", ErrPartMissing, c.destName(f), size, want[i])
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%w: %s not there after %s", ErrPartMissing, c.destName(f), wait)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(poll):
			}
			poll = min(2*poll, time.Second)
		}
	}
	return nil
}

// outSize returns the size of the output f, and whether it is there
// (see waitFor): a local file, or a name in a SizeDestination.
func (c *config) outSize(ctx context.Context, f string) (int64, bool, error) {
	if c.dest == nil {
		fi, err := os.Stat(f)
		if err != nil {
			return 0, false, nil // not there (yet)
		}
		return fi.Size(), true, nil
	}
	sd, ok := c.dest.(SizeDestination)
	if !ok { // refused by validatePart
		return 0, false, fmt.Errorf("%w: --part needs a destination that reports sizes", ErrOption)
	}
	return sd.Size(ctx, f)
}
