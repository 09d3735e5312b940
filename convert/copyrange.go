package convert

import (
	"context"
	"io"
	"os"
	"sync"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/internal/par"
	"github.com/ckpt-dev/ckpt/statedict"
)

// A tensor written unchanged from a local file is copied into the output
// by the kernel (atomicfile.RangeReader), and its checks are not dropped:
// the bytes are read back from the output, each piece once copied, into
// one small reused buffer on a second goroutine, and fed to the same
// checkedReader the read path uses (CRC32 of a zip record, recorded
// digest) and to the output's digest. What is verified is what was
// written; a mismatch fails the conversion as before, and the temporary
// output is discarded. With the piped copy (atomicfile.PipedCopy, the
// default where the bytes go to the page cache) the Writer reads the
// input through Read instead, in pieces of 512 KiB, and writes the very
// buffer the checks have just read: what is verified is again what lands
// in the file, and no checker goroutine is started.

// checkBufSize is the buffer the output's bytes are read back into: small
// enough to stay in the CPU's cache (L2) while they are hashed, and 8
// whole digest chunks, the least digest.Digest.Write hashes 8 at a time
// with its vector kernel (fewer go through the scalar xxh64, 4x the CPU).
const checkBufSize = 8 * digest.ChunkSize

// checkBufs holds the read-back buffers between tensors (a free list the
// collector does not empty, as castBufs).
var checkBufs = par.FreeList[byte]{Max: 4}

// rangeCopy is a tensor's bytes in place in a local input file
// (statedict.Tensor.InPlace), handed to the output's Writer.
type rangeCopy struct {
	ctx   context.Context
	span  statedict.FileSpan
	pos   int64          // bytes consumed (copied or read)
	cr    *checkedReader // the read path's checks
	sink  io.Writer      // the output's digest, and progress
	jobs  chan fileRange // pieces copied, to check
	done  chan struct{}  // closed when the checker has ended
	mu    sync.Mutex
	err   error       // the checker's
	ended bool        // wait was called: pieces are checked as they are copied
	began bool        // the checker was started (by the first piece copied)
	reads *readAheads // the source's read-ahead hints (readahead.go)
}

// fileRange is a piece copied: n bytes at off of f.
type fileRange struct {
	f      *os.File
	off, n int64
}

// rangeSource returns the item's bytes as a rangeCopy, with the
// checkedReader that verifies them, or nil where they are not copied
// unchanged from a local file: a cast, a transformed or wrapped output,
// a compressed or remote input. sink receives the bytes (read back from
// the output) in order.
func (c *config) rangeSource(ctx context.Context, tmp *tempFile, it *item, sink io.Writer) (*rangeCopy, *checkedReader, error) {
	if atomicfile.NoRangeCopy || tmp.file == nil || c.wrap != nil || it.dtype != it.src.DType || c.transformed[it.src.Storage] != nil {
		return nil, nil, nil
	}
	span, ok, err := it.src.InPlace()
	if err != nil {
		return nil, nil, &TensorError{Name: it.name, Err: err}
	}
	if !ok || span.Len != it.nbytes() {
		return nil, nil, nil
	}
	rc, cr, err := c.checks.tensorReader(ctx, it.src, false)
	if err != nil {
		return nil, nil, err
	}
	rc.Close() // the bytes are read back from the output instead
	r := &rangeCopy{ctx: ctx, span: span, cr: cr, reads: &c.checks.reads, sink: io.MultiWriter(sink, progressWriter{io.Discard, c.progress}),
		jobs: make(chan fileRange, 2), done: make(chan struct{})}
	return r, cr, nil
}

// check feeds the pieces copied, read back, to the checks.
func (r *rangeCopy) check() {
	defer close(r.done)
	bp := checkBufs.Get(checkBufSize)
	defer checkBufs.Put(bp)
	for p := range r.jobs {
		if r.failed() != nil {
			continue
		}
		if err := r.feed(io.NewSectionReader(p.f, p.off, p.n), *bp); err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
		}
	}
}

// feed reads src through the checkedReader into the sink.
func (r *rangeCopy) feed(src io.Reader, buf []byte) error {
	r.cr.r = src
	_, err := io.CopyBuffer(r.sink, onlyReader{r.cr}, buf)
	return err
}

// onlyReader hides everything but Read, so that io.CopyBuffer uses the
// buffer given.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func (r *rangeCopy) failed() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// FileRange is where the bytes not yet consumed lie.
func (r *rangeCopy) FileRange() (*os.File, int64, int64) {
	return r.span.File, r.span.Off + r.pos, r.span.Len - r.pos
}

// Copied queues the piece copied for the checks.
func (r *rangeCopy) Copied(out *os.File, outOff, k int64) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if err := r.failed(); err != nil {
		return err
	}
	r.pos += k
	if !r.began && !r.ended {
		// Started with the first piece: a piped copy
		// (atomicfile.PipedCopy) reads through Read and needs none.
		r.began = true
		go r.check()
	}
	if r.ended {
		bp := checkBufs.Get(checkBufSize)
		defer checkBufs.Put(bp)
		return r.feed(io.NewSectionReader(out, outOff, k), *bp)
	}
	r.jobs <- fileRange{f: out, off: outOff, n: k}
	return nil
}

// Read reads the bytes not copied (the kernel refused the copy, or the
// tensor is small) from the input, through the checks, once the pieces
// copied so far are checked.
func (r *rangeCopy) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	if r.pos >= r.span.Len {
		return 0, io.EOF
	}
	r.wait()
	if err := r.failed(); err != nil {
		return 0, err
	}
	r.reads.hint(r.span.File, r.span.Off+r.pos)
	r.cr.r = io.NewSectionReader(r.span.File, r.span.Off+r.pos, r.span.Len-r.pos)
	n, err := r.cr.Read(p)
	r.pos += int64(n)
	if n > 0 {
		r.sink.Write(p[:n]) // a digest and a counter: no errors
	}
	if err == io.EOF && r.pos < r.span.Len {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// wait ends the checker once every piece queued is checked; later
// pieces are read (Read).
func (r *rangeCopy) wait() {
	if !r.ended {
		r.ended = true
		close(r.jobs)
	}
	if r.began {
		<-r.done
	}
}

// Close waits for the checks of the pieces copied and reports the
// checker's error.
func (r *rangeCopy) Close() error {
	r.wait()
	return r.failed()
}
