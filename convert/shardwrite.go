package convert

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
)

// Shards of a local output are written several at once. One output file
// is written on one core at a time whatever the number of writers (ext4
// holds the inode's i_rwsem across every buffered write and every splice
// batch of copy_file_range: docs/benchmarks.md, local35c), but shards are
// different files, with different locks: each shard goes to its own
// temporary file on its own goroutine (with its own checker for the bytes
// the kernel copies), so that the kernel's copies into the page cache run
// on every core. The outputs are the same bytes as written one after
// another, committed in the same order (shards, then the index) and only
// once every shard is finished; a failure in any shard stops the others
// and discards them all.
//
// Memory: each shard being written holds its Writer's buffers
// (atomicfile: 3 x 4 MiB, taken from a pool shared by the shards) and one
// read-back buffer of the checks (512 KiB), so shardWorkers() shards hold
// at most 4 x 12.5 MiB.

// maxShardWorkers bounds the shards written at once, whatever the CPUs.
const maxShardWorkers = 4

// shardWorkers returns how many shards of a local output are written at
// once: one per CPU Go may use, at most maxShardWorkers. A variable, for
// tests (1 writes them one after another).
var shardWorkers = func() int { return min(runtime.GOMAXPROCS(0), maxShardWorkers) }

// shardStarted, when set (tests), is called by writeShards as shard i
// starts, on the goroutine that writes it.
var shardStarted func(i int)

// shardConcurrency returns how many of groups' shards writeOutputs writes
// at once: 1 (in order, as before) for a Destination (its uploads have
// their own parallelism), a split conversion (--part), an output wrapper,
// a transform or --quantize (state shared between tensors), and formats
// other than safetensors and .pth.
func (c *config) shardConcurrency(l *layout, groups [][]*item) int {
	if len(groups) < 2 || c.dest != nil || !c.dcpOpt.part.whole() || c.wrap != nil ||
		c.transform != nil || c.quantize != nil || len(c.transformed) > 0 ||
		l.format != Safetensors && l.format != PyTorch {
		return 1
	}
	return max(1, min(shardWorkers(), len(groups)))
}

// writeShards writes groups[i] to outs[i] (the first with the plan's
// values) on up to n goroutines, taking the shards in order (n = 1: one
// after the other); a shard of another part (--part) is not written, and
// counts its tensors' bytes. It returns the temporary files made, in
// shard order, for the caller to commit or discard, and the tensor bytes
// of each shard; on error, every file made is returned for discarding,
// and the error is the first shard's that did not fail only because
// another one had.
func (c *config) writeShards(ctx context.Context, p *plan, l *layout, groups [][]*item, outs []string, md map[string]string, n int) ([]*tempFile, []int64, error) {
	// Shards written at once stop each other through wctx. One at a
	// time, they are written under ctx itself: a Destination's upload
	// keeps the context it was created with until it is committed,
	// after this returns.
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if n > 1 {
		wctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	var failed atomic.Bool
	if fn := c.progress; fn != nil {
		var mu sync.Mutex
		c.progress = func(k int64) {
			mu.Lock()
			defer mu.Unlock()
			fn(k)
		}
		defer func() { c.progress = fn }()
	}
	temps := make([]*tempFile, len(groups))
	sizes := make([]int64, len(groups))
	errs := make([]error, len(groups))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(groups) {
					return
				}
				if err := wctx.Err(); err != nil || failed.Load() {
					errs[i] = cmp.Or(err, context.Canceled)
					continue
				}
				if c.dcpOpt.part.skips(i, len(groups)) { // another part's (--part)
					for _, it := range groups[i] {
						sizes[i] += it.nbytes()
					}
					continue
				}
				if shardStarted != nil {
					shardStarted(i)
				}
				values := p.values
				if i > 0 {
					values = nil
				}
				temps[i], sizes[i], errs[i] = c.writeFile(wctx, outs[i], l.out, groups[i], values, p.tree, md)
				if errs[i] != nil {
					failed.Store(true)
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	var made []*tempFile
	for _, t := range temps {
		if t != nil {
			made = append(made, t)
		}
	}
	return made, sizes, firstShardErr(ctx, errs)
}

// firstShardErr returns the first error of errs that is not a
// cancellation caused by another shard's failure (ctx, the caller's, is
// not done), or the first error when every one is.
func firstShardErr(ctx context.Context, errs []error) error {
	var first error
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil || !errors.Is(err, context.Canceled) {
			return err
		}
	}
	return first
}
