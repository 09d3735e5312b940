package convert

import (
	"context"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// rowChunkBytes is the input bytes of one block of rows (at least one
// row; a multiple of four rows where it holds four or more, the
// transform's kernel groups). A variable, for tests of many small blocks.
var rowChunkBytes int64 = 256 << 10

// rowWorkers is how many goroutines transform one tensor's blocks (0: one
// per CPU, runtime.GOMAXPROCS). A variable, for tests.
var rowWorkers = 0

// rowChunk is one block of rows: its input bytes, the first row and the
// count, and the error that ended the stream. Read decides where each
// block's output goes: a place in its caller's buffer (dst: state
// chunkPlaced), or itself (chunkRunning: a block that crosses the end of
// the caller's buffer, transformed by Read a few rows at a time). It then
// sends go, on which the worker that took the block from the queue
// waits: that worker transforms a placed block unless Read took it back
// first (also chunkRunning). No block is transformed into a buffer of its
// own and copied: the output goes straight into the buffer the caller
// hands on (the output's write buffers), and only a row crossing the end
// of one is transformed aside (out) and copied. holders counts the two
// that must be done with a block before it is reused: the worker that
// takes it from the queue, and whoever transforms it.
type rowChunk struct {
	in, out  []byte
	dst      []byte
	r0, rows int64
	err      error
	goCh     chan struct{}
	state    atomic.Int32
	holders  atomic.Int32
}

// The states of a rowChunk.
const (
	chunkQueued  int32 = iota // read; Read has not reached it
	chunkPlaced               // its output goes to dst; nobody has started it
	chunkRunning              // being transformed (into dst, or by Read)
)

// freeRowChunks keeps the blocks' buffers from one tensor to the next (a
// channel, not a sync.Pool, which the garbage collector empties: fresh
// memory costs more in page faults than the transform's arithmetic).
var freeRowChunks = make(chan *rowChunk, 64)

func getRowChunk() *rowChunk {
	select {
	case ch := <-freeRowChunks:
		return ch
	default:
		return &rowChunk{goCh: make(chan struct{}, 1)}
	}
}

func putRowChunk(ch *rowChunk) {
	ch.err, ch.dst = nil, nil
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
// reads the input a block of rows at a time (through the input's checks),
// workers on every CPU transform the blocks, and Read hands them on in
// order (rowStream).
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
	workers := rowWorkers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	per := max(rowChunkBytes/inRow, 1)
	if per >= 4 {
		per &^= 3
	}
	workers = int(min(int64(workers), (rows+per-1)/per))
	// Two blocks per worker: one being transformed and one read ahead for
	// it, and two more: one Read transforms itself, one being read.
	n := 2*workers + 2
	s := &rowStream{ctx: ctx, name: name, c: c, order: make(chan *rowChunk, n), work: make(chan *rowChunk, n), free: make(chan *rowChunk, n), done: make(chan struct{}), cancel: cancel, rc: rc,
		fn: fn, to: to, inRow: inRow, outRow: outRow}
	for range n {
		s.free <- getRowChunk()
	}
	go s.produce(ctx, name, rows, per)
	s.workers.Add(workers)
	for range workers {
		go s.transform(ctx)
	}
	return s
}

// rowStream serves a row-transformed tensor: produce reads blocks of rows
// through the input's checks into free blocks and queues them for the
// workers (work) and, in input order, for Read (order); Read places each
// block's output in the buffer it is handed and the workers (transform)
// compute them there, Read taking back the ones no worker has started
// before it returns. The output is the bytes fn gives the rows in order,
// whatever the number of workers and however Read is called.
type rowStream struct {
	ctx           context.Context // the stream's, cancelled by Close
	name          string
	c             *config
	order, work   chan *rowChunk // closed by produce
	free          chan *rowChunk
	done          chan struct{} // closed when produce returns
	workers       sync.WaitGroup
	placed        sync.WaitGroup // blocks placed by the Read under way, not yet transformed
	mine          []*rowChunk    // the blocks Read placed (some may be reused since)
	cancel        context.CancelFunc
	rc            io.ReadCloser
	fn            func([]byte, dtype.DType, []byte, int64, int64)
	to            dtype.DType
	inRow, outRow int64     // bytes of one row in and out
	cur           *rowChunk // the block Read transforms itself, rows from curRow
	curRow        int64
	part          []byte // the output of cur's row curRow-1 not yet read
	err           error
	perr          error  // why produce stopped before the last row
	finish        func() // the transform's, called by Close (nil: none)
	closed        bool
}

func (s *rowStream) produce(ctx context.Context, name string, rows, per int64) {
	defer close(s.done)
	defer close(s.order)
	defer close(s.work)
	src := ctxReader{ctx, s.rc}
	for r0 := int64(0); r0 < rows; r0 += per {
		var ch *rowChunk
		select {
		case ch = <-s.free:
		case <-ctx.Done():
			s.perr = &TensorError{Name: name, Err: ctx.Err()} // seen by Read once order is closed
			return
		}
		k := min(per, rows-r0)
		ch.in = growBytes(ch.in, max(per*s.inRow, int64(cap(ch.in))))[:k*s.inRow]
		ch.r0, ch.rows = r0, k
		if _, err := io.ReadFull(src, ch.in); err != nil {
			ch.err = &TensorError{Name: name, Err: err}
			s.order <- ch // to Read only: no worker holds it
			return
		}
		ch.state.Store(chunkQueued)
		ch.holders.Store(2)
		s.work <- ch
		s.order <- ch
	}
}

// doneWith is called by each holder of a block; the last gives it back.
func (s *rowStream) doneWith(ch *rowChunk) {
	if ch.holders.Add(-1) == 0 {
		s.free <- ch
	}
}

// transform is one worker: it waits until Read has decided on each block
// it takes and computes the placed ones straight into their place, but
// skips the arithmetic once the stream is stopped.
func (s *rowStream) transform(ctx context.Context) {
	defer s.workers.Done()
	for ch := range s.work {
		<-ch.goCh
		if ch.state.CompareAndSwap(chunkPlaced, chunkRunning) {
			if ctx.Err() == nil {
				s.fn(ch.dst, s.to, ch.in, ch.r0, ch.r0+ch.rows)
			}
			ch.dst = nil
			s.placed.Done()
			s.doneWith(ch)
		}
		s.doneWith(ch)
	}
}

// steal transforms, on Read's goroutine, the last block Read placed that no
// worker has started, and reports whether there was one.
func (s *rowStream) steal() bool {
	for i := len(s.mine) - 1; i >= 0; i-- {
		ch := s.mine[i]
		s.mine = s.mine[:i]
		if ch.state.CompareAndSwap(chunkPlaced, chunkRunning) {
			s.fn(ch.dst, s.to, ch.in, ch.r0, ch.r0+ch.rows)
			ch.dst = nil
			s.placed.Done()
			s.doneWith(ch)
			return true
		}
	}
	return false
}

// next returns the next block in order, transforming placed blocks
// while produce has none ready; ok is false at the end of the stream.
func (s *rowStream) next() (ch *rowChunk, ok bool) {
	for {
		select {
		case ch, ok = <-s.order:
			return ch, ok
		default:
		}
		if !s.steal() {
			ch, ok = <-s.order
			return ch, ok
		}
	}
}

// ownRows are rows lo to hi of a block Read transforms itself into dst.
type ownRows struct {
	ch     *rowChunk
	lo, hi int64
	dst    []byte
}

// Read hands on the rows in order into p: each block that fits whole in
// what is left of p is placed there for a worker (or Read) to transform,
// a block crossing p's end is Read's own, its whole rows transformed
// straight into p and the row crossing the end aside and copied.
func (s *rowStream) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := copy(p, s.part)
	s.part = s.part[n:]
	if len(s.part) > 0 {
		return n, nil
	}
	var own [2]ownRows
	nown := 0
	// take gives Read the rows of its block that fit in p, and lets go of
	// the block when none are left.
	take := func() {
		k := min(s.cur.rows-s.curRow, int64(len(p)-n)/s.outRow)
		if k > 0 {
			own[nown] = ownRows{s.cur, s.curRow, s.curRow + k, p[n : n+int(k*s.outRow)]}
			nown++
			n += int(k * s.outRow)
			s.curRow += k
		}
		if s.curRow == s.cur.rows {
			if k == 0 {
				s.doneWith(s.cur)
			}
			s.cur = nil
		}
	}
	if s.cur != nil {
		take()
	}
	for s.cur == nil && n < len(p) {
		ch, ok := s.next()
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
		s.c.progressAdd(int64(len(ch.in)))
		size := int(ch.rows * s.outRow)
		if len(p)-n >= size {
			ch.dst = p[n : n+size]
			ch.state.Store(chunkPlaced) // no worker changes a queued block
			s.placed.Add(1)
			s.mine = append(s.mine, ch)
			ch.goCh <- struct{}{}
			n += size
			continue
		}
		ch.state.Store(chunkRunning)
		ch.goCh <- struct{}{}
		s.cur, s.curRow = ch, 0
		take()
	}
	for _, o := range own[:nown] {
		ch := o.ch
		s.fn(o.dst, s.to, ch.in[o.lo*s.inRow:o.hi*s.inRow], ch.r0+o.lo, ch.r0+o.hi)
		if o.hi == ch.rows {
			s.doneWith(ch)
		}
	}
	if s.cur != nil && n < len(p) {
		// The row crossing p's end.
		ch, r := s.cur, s.curRow
		ch.out = growBytes(ch.out, max(s.outRow, int64(cap(ch.out))))[:s.outRow]
		s.fn(ch.out, s.to, ch.in[r*s.inRow:(r+1)*s.inRow], ch.r0+r, ch.r0+r+1)
		k := copy(p[n:], ch.out)
		n += k
		s.part = ch.out[k:]
		s.curRow++
	}
	for s.steal() {
	}
	s.placed.Wait()
	if err := s.ctx.Err(); err != nil {
		// The workers skip the arithmetic once stopped: p is not
		// the rows.
		s.err = &TensorError{Name: s.name, Err: err}
		return 0, s.err
	}
	if n > 0 {
		return n, nil
	}
	return 0, s.err
}

// Close stops the reader and the workers, waits for them and keeps the
// blocks' buffers for the next tensor.
func (s *rowStream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.cancel()
	if s.cur != nil {
		s.doneWith(s.cur)
		s.cur, s.part = nil, nil
	}
	for ch := range s.order {
		if ch.err != nil {
			s.free <- ch
			continue
		}
		ch.state.Store(chunkRunning)
		ch.goCh <- struct{}{}
		s.doneWith(ch)
	}
	<-s.done
	s.workers.Wait()
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
