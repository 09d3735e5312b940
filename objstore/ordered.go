package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// Ordered streams (Object.StreamRange): a range is read front to back by
// one reader, as a converter writing its output in order reads it, and the
// bytes of each ranged GET are received straight into the reader's own
// buffer (Read(p) reads the response body into p), with no buffer of the
// Store's in between. The GETs after the one being read are made ahead,
// each waiting with its body in the socket's buffers until the reader
// reaches it, so that the server has the next bytes on the way while the
// reader checks and writes the last. Reading through the chunk cache
// instead (ReadAt of less than a chunk) costs a copy of every byte out of
// the cache: a quarter of the client's CPU of `ckpt convert s3://` from a
// server holding the object in memory (docs/benchmarks.md).

// streamGetSize and streamDepth are the size of an ordered stream's GETs
// and how many are in flight at once (the one read and those ahead).
// CKPT_STREAM_GET and CKPT_STREAM_DEPTH override them (for measurements).
var (
	streamGetSize = envInt("CKPT_STREAM_GET", 64<<20)
	streamDepth   = int(envInt("CKPT_STREAM_DEPTH", 4))
)

func envInt(name string, def int64) int64 {
	if n, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil && n > 0 {
		return n
	}
	return def
}

// pullSeg is one GET of an ordered stream. Its goroutine reads the body
// into the buffers the reader hands over (bufs), one at a time, and
// answers each with the bytes received (got).
type pullSeg struct {
	end  int64       // the GET's end in the object
	bufs chan []byte // the reader's buffers
	got  chan int    // bytes received into each; capacity 1
	done chan struct{}
	err  error // set before done is closed

	slot     chan struct{} // closed once the GET holds one of the Store's request slots
	slotOnce sync.Once
	sent     int64 // bytes handed over, counted from the GET's start: a retry skips them
}

// holding notes that the GET holds a request slot.
func (s *pullSeg) holding() { s.slotOnce.Do(func() { close(s.slot) }) }

// pullBody reads n bytes of body into the buffers of s's reader. After a
// retry it first skips what the reader already has.
func pullBody(ctx context.Context, body io.Reader, s *pullSeg, n int64) (int, error) {
	if s.sent > 0 {
		if k, err := io.CopyN(io.Discard, body, s.sent); err != nil {
			return int(k), unexpectedEOF(err)
		}
	}
	k := s.sent
	for k < n {
		var p []byte
		select {
		case p = <-s.bufs:
		case <-ctx.Done():
			return int(k), ctx.Err()
		}
		m, err := io.ReadFull(body, p[:min(int64(len(p)), n-k)])
		k += int64(m)
		s.sent = k
		s.got <- m
		if err != nil {
			return int(k), unexpectedEOF(err)
		}
	}
	return int(k), nil
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// rangeReader is an ordered stream over [off, end) of an object.
type rangeReader struct {
	o        *Object
	caller   context.Context // StreamRange's
	ctx      context.Context
	cancel   context.CancelFunc
	stop     func() bool // ends the caller's context's hold on cancel
	off, end int64       // the next byte to hand out; the range's end
	next     int64       // where the next GET starts
	segs     []*pullSeg  // GETs started, in order; segs[0] is being read
	wg       sync.WaitGroup
	err      error
}

// StreamRange returns a reader of the n bytes at off, in order. It makes
// ranged GETs of up to 64 MiB (from chunk boundary to chunk boundary, as
// ReadAtPieces does) a few ahead of the reader, and each Read receives
// the body of the GET it has reached straight into the caller's buffer,
// at most 1 MiB at a time, so that a caller checking the bytes as they
// come finds them in the CPU's cache. A request cut short is retried and
// resumes where the reader is. Nothing is read before the first Read's
// GETs are made; Close stops the GETs in flight. ctx (with Close)
// cancels the stream; the range must lie within the object.
func (o *Object) StreamRange(ctx context.Context, off, n int64) (io.ReadCloser, error) {
	if off < 0 || n < 0 || off > o.size || n > o.size-off {
		return nil, &Error{Op: "read", URL: o.URL(), Err: fmt.Errorf("range [%d, %d) outside the object's %d bytes", off, off+n, o.size)}
	}
	r := &rangeReader{o: o, caller: ctx, off: off, end: off + n, next: off}
	r.ctx, r.cancel = context.WithCancel(o.ctx)
	r.stop = context.AfterFunc(ctx, r.cancel)
	return r, nil
}

// fill starts GETs until streamDepth are in flight or the range is
// covered. Each GET asks for its request slot only once the one before
// holds one, so that the GET the reader waits on never waits for a slot
// held by a GET waiting for the reader.
func (r *rangeReader) fill() {
	chunk := r.o.s.cfg.chunk
	step := max(chunk, streamGetSize/chunk*chunk)
	depth := max(1, min(streamDepth, r.o.s.cfg.concurrency))
	for len(r.segs) < depth && r.next < r.end {
		at := r.next
		end := min(at/chunk*chunk+step, r.end)
		r.next = end
		s := &pullSeg{end: end, bufs: make(chan []byte), got: make(chan int, 1), done: make(chan struct{}), slot: make(chan struct{})}
		var prev *pullSeg
		if len(r.segs) > 0 {
			prev = r.segs[len(r.segs)-1]
		}
		r.segs = append(r.segs, s)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer close(s.done)
			defer s.holding()
			if prev != nil {
				select {
				case <-prev.slot:
				case <-prev.done:
				case <-r.ctx.Done():
					s.err = r.ctx.Err()
					return
				}
			}
			s.err = r.o.fetchTo(r.ctx, at, dest{n: end - at, pull: s})
		}()
	}
}

// Read receives the next bytes of the range into p.
func (r *rangeReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if err := r.caller.Err(); err != nil {
		return 0, r.fail(err)
	}
	if r.off >= r.end {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	r.fill()
	s := r.segs[0]
	p = p[:min(int64(len(p)), s.end-r.off, landedPiece)]
	for {
		select {
		case s.bufs <- p:
		case <-s.done:
			return 0, r.fail(s.err)
		}
		m := <-s.got
		if m == 0 {
			continue // the GET failed and is retried; hand p over again
		}
		r.off += int64(m)
		if r.off == s.end {
			<-s.done
			if s.err != nil {
				return m, r.fail(s.err)
			}
			r.segs = r.segs[1:]
		}
		return m, nil
	}
}

// fail ends the stream with err (a GET that ended early without one, if
// nil; the caller's context's error when that is done).
func (r *rangeReader) fail(err error) error {
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	if cerr := r.caller.Err(); cerr != nil {
		err = cerr
	}
	if errors.Is(err, context.Canceled) && r.o.ctx.Err() != nil {
		err = &Error{Op: "read", URL: r.o.URL(), Err: errClosed}
	}
	r.err = err
	r.cancel()
	return err
}

// Close stops the GETs in flight and waits for them.
func (r *rangeReader) Close() error {
	r.stop()
	r.cancel()
	r.wg.Wait()
	if r.err == nil {
		r.err = &Error{Op: "read", URL: r.o.URL(), Err: errors.New("read after Close")}
	}
	return nil
}
