package convert

import (
	"context"
	"io"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// rowChunkBytes is the input bytes of one block of rows a RowTransform is
// handed (at least one row): small enough that the block, its output and
// the transform's tiles stay in the second-level cache.
const rowChunkBytes = 256 << 10

// rowChunks is the number of blocks in flight for one tensor: one being
// computed, one written, one spare.
const rowChunks = 3

// rowChunk is one block of rows: the input's bytes, the transformed
// output, and the error that ended the stream.
type rowChunk struct {
	in, out []byte
	n       int // bytes of out
	read    int64
	err     error
}

// freeRowChunks keeps the blocks' buffers from one tensor to the next (a
// channel, not a sync.Pool, which the garbage collector empties: fresh
// memory costs more in page faults than the transform's arithmetic).
var freeRowChunks = make(chan *rowChunk, rowChunks)

func getRowChunk() *rowChunk {
	select {
	case ch := <-freeRowChunks:
		return ch
	default:
		return &rowChunk{}
	}
}

func putRowChunk(ch *rowChunk) {
	ch.err = nil
	select {
	case freeRowChunks <- ch:
	default:
	}
}

// rowCols returns t's row length when the transform replaces it a block
// of rows at a time (RowTransform), else 0.
func (c *config) rowCols(t *statedict.Tensor) int64 {
	rt, ok := c.transform.(RowTransform)
	if !ok || c.transformed[t.Storage] != t {
		return 0
	}
	cols := rt.RowCols(t)
	if cols <= 0 || t.NumEl()%cols != 0 {
		return 0
	}
	return cols
}

// rowReader returns t's transformed values encoded as to, computed a block
// of rows at a time on a goroutine of their own while the caller writes
// the block before (rowStream).
func (c *config) rowReader(ctx context.Context, t *statedict.Tensor, to dtype.DType, cols int64) (io.ReadCloser, *checkedReader, error) {
	fn, err := c.transform.(RowTransform).MergeRows(ctx, t)
	if err != nil {
		return nil, nil, &TensorError{Name: t.Name, Err: err}
	}
	rc, cr, err := c.checks.tensorReader(ctx, t, true)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &rowStream{c: c, ready: make(chan *rowChunk, rowChunks), free: make(chan *rowChunk, rowChunks), done: make(chan struct{}), cancel: cancel, rc: rc}
	for range rowChunks {
		s.free <- getRowChunk()
	}
	go s.produce(ctx, c, t, to, cols, fn)
	return s, cr, nil
}

// rowStream serves a row-transformed tensor: produce reads a block of rows
// through the input's checks, transforms it into a free chunk and queues
// it; Read hands the queued chunks on in order.
type rowStream struct {
	c           *config
	ready, free chan *rowChunk
	done        chan struct{}
	cancel      context.CancelFunc
	rc          io.ReadCloser
	cur         *rowChunk
	off         int
	err         error
	perr        error // why produce stopped before the last row
	closed      bool
}

func (s *rowStream) produce(ctx context.Context, c *config, t *statedict.Tensor, to dtype.DType, cols int64, fn func([]byte, dtype.DType, []byte, int64, int64)) {
	defer close(s.done)
	defer close(s.ready)
	is, os := int64(t.DType.Size()), int64(to.Size())
	rows := t.NumEl() / cols
	per := max(rowChunkBytes/(cols*is), 1)
	src := ctxReader{ctx, s.rc}
	for r0 := int64(0); r0 < rows; r0 += per {
		var ch *rowChunk
		select {
		case ch = <-s.free:
		case <-ctx.Done():
			s.perr = &TensorError{Name: t.Name, Err: ctx.Err()} // seen by Read once ready is closed
			return
		}
		k := min(per, rows-r0)
		ch.in = growBytes(ch.in, max(per*cols*is, int64(cap(ch.in))))[:k*cols*is]
		ch.out = growBytes(ch.out, max(per*cols*os, int64(cap(ch.out))))[:k*cols*os]
		if _, err := io.ReadFull(src, ch.in); err != nil {
			ch.err = &TensorError{Name: t.Name, Err: err}
			s.ready <- ch
			return
		}
		ch.read = int64(len(ch.in))
		fn(ch.out, to, ch.in, r0, r0+k)
		ch.n = len(ch.out)
		s.ready <- ch
	}
}

// Read copies the queued blocks' output into p.
func (s *rowStream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	for n < len(p) {
		if s.cur == nil {
			ch, ok := <-s.ready
			if !ok {
				if s.err = s.perr; s.err == nil {
					s.err = io.EOF
				}
				break
			}
			if ch.err != nil {
				s.err = ch.err
				s.free <- ch
				break
			}
			s.cur, s.off = ch, 0
		}
		k := copy(p[n:], s.cur.out[s.off:s.cur.n])
		n += k
		if s.off += k; s.off == s.cur.n {
			s.c.progressAdd(s.cur.read)
			s.free <- s.cur
			s.cur = nil
		}
	}
	if n > 0 {
		return n, nil
	}
	return 0, s.err
}

// Close stops the producer, waits for it and keeps the blocks' buffers
// for the next tensor.
func (s *rowStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.cancel()
	if s.cur != nil {
		s.free <- s.cur
		s.cur = nil
	}
	for ch := range s.ready {
		s.free <- ch
	}
	<-s.done
	err := s.rc.Close()
	close(s.free)
	for ch := range s.free {
		putRowChunk(ch)
	}
	return err
}
