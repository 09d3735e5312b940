package convert

import (
	"context"
	"io"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// rowChunkBytes is the input bytes of one block of rows read ahead for a
// RowTransform (at least one row; a multiple of four rows where it holds
// four or more, the transform's kernel groups).
const rowChunkBytes = 256 << 10

// rowChunks is the number of blocks in flight for one tensor: one being
// transformed, two read ahead.
const rowChunks = 3

// rowSpillBytes is the least output a Read computes straight into the
// caller's buffer; a buffer with room for less (its end falls inside a
// row, or the caller reads in small pieces) gets about this much computed
// into the block's own buffer and copied from there.
const rowSpillBytes = 64 << 10

// rowChunk is one block of rows read from the input: its bytes, the
// first row and the count, the error that ended the stream, and a buffer
// for output that did not fit the reader's (rowSpillBytes).
type rowChunk struct {
	in, out  []byte
	r0, rows int64
	err      error
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

// rowReader returns t's transformed values encoded as to: a goroutine
// reads the input a block of rows ahead (through the input's checks), and
// Read transforms the rows straight into the caller's buffer (rowStream):
// the output's write buffers, so the bytes are not copied again.
func (c *config) rowReader(ctx context.Context, t *statedict.Tensor, to dtype.DType, cols int64) (io.ReadCloser, *checkedReader, error) {
	fn, release, err := c.transform.(RowTransform).MergeRows(ctx, t)
	if err != nil {
		return nil, nil, &TensorError{Name: t.Name, Err: err}
	}
	rc, cr, err := c.checks.tensorReader(ctx, t, true)
	if err != nil {
		release()
		return nil, nil, err
	}
	s := newRowStream(ctx, c, t.Name, rc, fn, to, cols*int64(t.DType.Size()), cols*int64(to.Size()), t.NumEl()/cols)
	s.finish = release
	return s, cr, nil
}

// newRowStream starts the stream of rows rows of inRow bytes read from rc,
// transformed by fn into rows of outRow bytes encoded as to.
func newRowStream(ctx context.Context, c *config, name string, rc io.ReadCloser, fn func([]byte, dtype.DType, []byte, int64, int64), to dtype.DType, inRow, outRow, rows int64) *rowStream {
	ctx, cancel := context.WithCancel(ctx)
	s := &rowStream{c: c, ready: make(chan *rowChunk, rowChunks), free: make(chan *rowChunk, rowChunks), done: make(chan struct{}), cancel: cancel, rc: rc,
		fn: fn, to: to, inRow: inRow, outRow: outRow}
	for range rowChunks {
		s.free <- getRowChunk()
	}
	go s.produce(ctx, name, rows)
	return s
}

// rowStream serves a row-transformed tensor: produce reads blocks of rows
// through the input's checks into free chunks and queues them; Read
// transforms the queued rows in order into the caller's buffer.
type rowStream struct {
	c             *config
	ready, free   chan *rowChunk
	done          chan struct{}
	cancel        context.CancelFunc
	rc            io.ReadCloser
	fn            func([]byte, dtype.DType, []byte, int64, int64)
	to            dtype.DType
	inRow, outRow int64 // bytes of one row in and out
	cur           *rowChunk
	did           int64  // rows of cur transformed
	part          []byte // transformed bytes of cur not yet read (in cur.out)
	err           error
	perr          error  // why produce stopped before the last row
	finish        func() // the transform's, called by Close (nil: none)
	closed        bool
}

func (s *rowStream) produce(ctx context.Context, name string, rows int64) {
	defer close(s.done)
	defer close(s.ready)
	per := max(rowChunkBytes/s.inRow, 1)
	if per >= 4 {
		per &^= 3
	}
	src := ctxReader{ctx, s.rc}
	for r0 := int64(0); r0 < rows; r0 += per {
		var ch *rowChunk
		select {
		case ch = <-s.free:
		case <-ctx.Done():
			s.perr = &TensorError{Name: name, Err: ctx.Err()} // seen by Read once ready is closed
			return
		}
		k := min(per, rows-r0)
		ch.in = growBytes(ch.in, max(per*s.inRow, int64(cap(ch.in))))[:k*s.inRow]
		ch.r0, ch.rows = r0, k
		if _, err := io.ReadFull(src, ch.in); err != nil {
			ch.err = &TensorError{Name: name, Err: err}
			s.ready <- ch
			return
		}
		s.ready <- ch
	}
}

// Read transforms the queued rows into p: whole rows straight into p, or,
// when p has room for less than rowSpillBytes of them, about that much
// into the block's buffer, handed on from there.
func (s *rowStream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := 0
	for n < len(p) {
		if len(s.part) > 0 {
			k := copy(p[n:], s.part)
			s.part = s.part[k:]
			n += k
			continue
		}
		s.release()
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
			s.cur, s.did = ch, 0
		}
		ch := s.cur
		left := ch.rows - s.did
		k := min(left, int64(len(p)-n)/s.outRow)
		r, in := ch.r0+s.did, ch.in[s.did*s.inRow:]
		if k > 0 && (k == left || k*s.outRow >= rowSpillBytes) {
			s.fn(p[n:n+int(k*s.outRow)], s.to, in[:k*s.inRow], r, r+k)
			n += int(k * s.outRow)
		} else {
			k = min(left, max(k, (rowSpillBytes+s.outRow-1)/s.outRow))
			ch.out = growBytes(ch.out, max(k*s.outRow, int64(cap(ch.out))))[:k*s.outRow]
			s.fn(ch.out, s.to, in[:k*s.inRow], r, r+k)
			s.part = ch.out
		}
		s.did += k
	}
	s.release()
	if n > 0 {
		return n, nil
	}
	return 0, s.err
}

// release hands the current block back to the reader once its rows are
// transformed and read.
func (s *rowStream) release() {
	if s.cur != nil && s.did == s.cur.rows && len(s.part) == 0 {
		s.c.progressAdd(int64(len(s.cur.in)))
		s.free <- s.cur
		s.cur = nil
	}
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
		s.cur, s.part = nil, nil
	}
	for ch := range s.ready {
		s.free <- ch
	}
	<-s.done
	if s.finish != nil {
		s.finish()
	}
	err := s.rc.Close()
	close(s.free)
	for ch := range s.free {
		putRowChunk(ch)
	}
	return err
}
