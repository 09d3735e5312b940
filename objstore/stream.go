package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ckpt-dev/ckpt/internal/par"
)

// Streamed reads (Object.ReadAtStream): the bytes of a range are handed to
// the caller a piece at a time in a few buffers that the Store reuses, and
// never land in a buffer of the range's size. A caller that keeps the
// bytes elsewhere (devicecopy writes them into a memory file with pwrite)
// then touches no fresh memory of its own: on the machine of
// docs/benchmarks.md the first touch of a fresh page, from the kernel's
// receive copy and again from the hashing, was most of the CPU of a load
// from a server that had the object in memory.

// dest is where a GET puts the bytes of its range: into buf, or (sink
// set) n bytes handed to sink a piece at a time.
type dest struct {
	buf  []byte
	n    int64
	sink *pieceSink
	pull *pullSeg // an ordered stream's GET (ordered.go)
}

// into is a destination buffer.
func into(b []byte) dest { return dest{buf: b, n: int64(len(b))} }

// upTo returns d cut to at most n bytes.
func (d dest) upTo(n int64) dest {
	if n >= d.n {
		return d
	}
	if d.buf != nil {
		d.buf = d.buf[:n]
	}
	d.n = n
	return d
}

// pieceSink receives a streamed GET's bytes.
type pieceSink struct {
	at   int64 // the GET's start, relative to the streamed read's origin
	fn   func(piece []byte, off int64) error
	pool *par.FreeList[byte] // the Store's streamed-read buffers, landedPiece bytes each
}

// sinkError is an error of the caller's sink: not retried, and returned
// to ReadAtStream's caller as it is.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// streamBody reads n bytes of body through a pooled buffer, handing each
// piece to the sink. Pieces end at multiples of landedPiece counted from
// the streamed read's origin (not the GET's start).
func streamBody(body io.Reader, s *pieceSink, n int64) (int, error) {
	bp := s.pool.Get(landedPiece)
	defer s.pool.Put(bp)
	buf := *bp
	var k int64
	for k < n {
		step := min(landedPiece-(s.at+k)%landedPiece, n-k)
		m, err := io.ReadFull(body, buf[:step])
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return int(k) + m, err
		}
		if err := s.fn(buf[:m], s.at+k); err != nil {
			return int(k), &sinkError{err}
		}
		k += int64(m)
	}
	return int(k), nil
}

// ReadAtStream reads the n bytes at off with parallel ranged GETs, as a
// read of that size by ReadAtPieces does (ranges from chunk boundary to
// chunk boundary of up to the direct GET size), but hands them to sink a
// piece at a time instead of filling a buffer: sink(piece, at), at being
// the piece's offset from origin (origin <= off: where the caller's record
// starts, a segment of which it reads). A piece is at most 1 MiB and ends
// at a multiple of 1 MiB from origin or at the end of a GET, so that a
// caller checking fixed-size chunks of its record finds every chunk whole
// in one piece but those across a GET's boundary. Its buffer is reused
// once sink returns: sink must copy what it keeps. sink runs on the
// goroutines making the requests, several at once for disjoint pieces. A
// request cut short is retried from its start, so a piece may be handed
// over again, with the same bytes (the object's version is pinned).
//
// An error of sink ends the read and is returned as it is; so is ctx's
// error when ctx is cancelled. The range must lie within the object.
func (o *Object) ReadAtStream(ctx context.Context, origin, off, n int64, sink func(piece []byte, at int64) error) error {
	if origin < 0 || origin > off || n < 0 || off > o.size || n > o.size-off {
		return &Error{Op: "read", URL: o.URL(), Err: fmt.Errorf("range [%d, %d) outside the object's %d bytes", off, off+n, o.size)}
	}
	rctx, cancel := context.WithCancel(o.ctx)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	chunk := o.s.cfg.chunk
	step := max(chunk, o.s.cfg.directGet/chunk*chunk)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	fail := func(err error) { once.Do(func() { first = err; cancel() }) }
	for i := int64(0); i < n; {
		end := min((off+i)/chunk*chunk+step-off, n)
		at := i
		i = end
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := dest{n: end - at, sink: &pieceSink{at: off - origin + at, fn: sink, pool: &o.s.pieces}}
			if err := o.fetchTo(rctx, off+at, d); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var se *sinkError
	if errors.As(first, &se) {
		return se.err
	}
	if first == nil && o.ctx.Err() != nil {
		first = &Error{Op: "read", URL: o.URL(), Err: o.ctx.Err()}
	}
	return first
}
