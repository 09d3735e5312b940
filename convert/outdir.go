package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
)

// Where a DCP output and the parts of a split conversion go: local
// files, or a Destination (an s3://, gs:// or az:// prefix, issue 23).
// The conversions themselves (convertDCP, convertTo) are the same for
// both; what differs is here.

// dcpOutputs is where a DCP conversion puts its files, and what it takes
// back when it fails.
type dcpOutputs struct {
	c       *config
	undoDir func() // local: removes the directory it created, if empty
	// committed lists the Destination names committed by this call,
	// removed if a later step fails (the Destination contract).
	committed []string
	pending   []*tempFile // written, not yet committed (commitPending)
	done      bool        // the conversion succeeded: release keeps its outputs
}

// prepareDCP checks, before anything is written, that the outputs in
// check may be written (missing, or WithForce), and makes the local
// directory out.
func (c *config) prepareDCP(ctx context.Context, out string, check []string) (*dcpOutputs, error) {
	o := &dcpOutputs{c: c, undoDir: func() {}}
	if c.dest == nil {
		if fi, err := os.Stat(out); err == nil && !fi.IsDir() {
			return nil, fmt.Errorf("convert: output directory %s: not a directory", out)
		}
	}
	for _, f := range check {
		if c.force {
			break
		}
		if c.dest == nil {
			if _, err := os.Lstat(f); err == nil {
				return nil, fmt.Errorf("%w: %s", ErrExists, f)
			}
			continue
		}
		ok, err := c.dest.Exists(ctx, f)
		if err != nil {
			return nil, err
		}
		if ok {
			return nil, fmt.Errorf("%w: %s", ErrExists, c.dest.Name(f))
		}
	}
	if c.dest != nil {
		return o, nil
	}
	l := &layout{format: DCP, dir: out, mkdir: true}
	undo, err := l.makeDir()
	if err != nil {
		return nil, err
	}
	o.undoDir = undo
	return o, nil
}

// create starts the output f (for a local file, after removing what a
// killed conversion left beside it).
func (o *dcpOutputs) create(ctx context.Context, f string) (*tempFile, error) {
	if o.c.dest == nil {
		atomicfile.RemoveStale(f)
	}
	return o.c.create(ctx, f, 0)
}

// writeSmall writes b as the output f (a .metadata, an index) and commits
// it, returning its final name; nothing of it is left on an error.
func (o *dcpOutputs) writeSmall(ctx context.Context, f string, b []byte) (string, error) {
	t, err := o.create(ctx, f)
	if err != nil {
		return "", err
	}
	committed := false
	defer func() {
		if !committed {
			t.discard()
		}
	}()
	bw := o.c.output(t)
	if _, err := bw.Write(b); err != nil {
		return "", writeErr(f, err)
	}
	if err := bw.Flush(); err != nil {
		return "", writeErr(f, err)
	}
	if err := t.finish(); err != nil {
		return "", err
	}
	if err := o.commit(ctx, t); err != nil {
		return "", err
	}
	committed = true
	return t.final, nil
}

// commit puts the finished output t in place.
func (o *dcpOutputs) commit(ctx context.Context, t *tempFile) error {
	if t.out == nil {
		return t.commit(o.c.force)
	}
	if err := t.out.Commit(ctx); err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("convert: interrupted; %s not written: %w", t.final, err)
		}
		return err
	}
	t.out = nil // committed: nothing to abort
	o.committed = append(o.committed, t.key)
	return nil
}

// track keeps t to commit with the others (commitPending) or discard on
// failure (release).
func (o *dcpOutputs) track(t *tempFile) { o.pending = append(o.pending, t) }

// commitPending puts every tracked output in place, in order, and returns
// their final names.
func (o *dcpOutputs) commitPending(ctx context.Context) ([]string, error) {
	var finals []string
	for len(o.pending) > 0 {
		t := o.pending[0]
		if err := o.commit(ctx, t); err != nil {
			return nil, err
		}
		o.pending = o.pending[1:]
		finals = append(finals, t.final)
	}
	return finals, nil
}

// release is deferred by a DCP conversion: it discards what was written
// and not committed and, unless the conversion succeeded, undoes the
// rest.
func (o *dcpOutputs) release(ctx context.Context) {
	for _, t := range o.pending {
		t.discard()
	}
	o.pending = nil
	if !o.done {
		o.undo(ctx)
	}
}

// undo takes back what a failed conversion made: the local directory if
// it created it and nothing is in it (files a part committed stay, for a
// rerun to replace with WithForce), or every output committed to the
// Destination, so that a failed call leaves nothing there.
func (o *dcpOutputs) undo(ctx context.Context) {
	if o.c.dest == nil {
		o.undoDir()
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, k := range o.committed {
		o.c.dest.Remove(rctx, k)
	}
}
