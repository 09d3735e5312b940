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
// count, its transformed bytes, the error that ended the stream, and ready,
// which receives one value once the block is transformed (or failed).
// claimed is set by whoever transforms it: a worker, into out, or Read,
// straight into its caller's buffer; holders counts the two (the worker
// that takes it from the queue, Read) that must be done with a block
// Read claimed before it is reused.
type rowChunk struct {
	in, out  []byte
	r0, rows int64
	err      error
	ready    chan struct{}
	claimed  atomic.Bool
	holders  atomic.Int32
}

// freeRowChunks keeps the blocks' buffers from one tensor to the next (a
// channel, not a sync.Pool, which the garbage collector empties: fresh
// memory costs more in page faults than the transform's arithmetic).
var freeRowChunks = make(chan *rowChunk, 64)

func getRowChunk() *rowChunk {
	select {
	case ch := <-freeRowChunks:
		return ch
	default:
		return &rowChunk{ready: make(chan struct{}, 1)}
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
	// it, and two more: one being handed on by Read, one being read.
	n := 2*workers + 2
	s := &rowStream{c: c, order: make(chan *rowChunk, n), work: make(chan *rowChunk, n), free: make(chan *rowChunk, n), done: make(chan struct{}), cancel: cancel, rc: rc,
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
// workers (work) and, in input order, for Read (order); the workers
// (transform) compute each block's output into its own buffer; Read
// hands the blocks' outputs on in order, each once it is ready. The
// output is the bytes fn gives the rows in order, whatever the number of
// workers and however Read is called.
type rowStream struct {
	c             *config
	order, work   chan *rowChunk // closed by produce
	free          chan *rowChunk
	done          chan struct{} // closed when produce returns
	workers       sync.WaitGroup
	cancel        context.CancelFunc
	rc            io.ReadCloser
	fn            func([]byte, dtype.DType, []byte, int64, int64)
	to            dtype.DType
	inRow, outRow int64     // bytes of one row in and out
	cur           *rowChunk // the block Read is handing on
	part          []byte    // cur's output not yet read
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
			ch.ready <- struct{}{}
			s.order <- ch
			return
		}
		ch.claimed.Store(false)
		ch.holders.Store(2)
		s.work <- ch
		s.order <- ch
	}
}

// doneWith is called by each holder of a block that Read claimed; the last
// gives it back.
func (s *rowStream) doneWith(ch *rowChunk) {
	if ch.holders.Add(-1) == 0 {
		s.free <- ch
	}
}

// transform is one worker: it computes the output of each block it takes,
// and skips the arithmetic once the stream is stopped.
func (s *rowStream) transform(ctx context.Context) {
	defer s.workers.Done()
	for ch := range s.work {
		if !ch.claimed.CompareAndSwap(false, true) {
			s.doneWith(ch) // Read transforms it
			continue
		}
		if ctx.Err() == nil {
			ch.out = growBytes(ch.out, max(ch.rows*s.outRow, int64(cap(ch.out))))[:ch.rows*s.outRow]
			s.fn(ch.out, s.to, ch.in, ch.r0, ch.r0+ch.rows)
		}
		ch.ready <- struct{}{}
	}
}

// Read hands the blocks on in order into p: a block no worker has started
// and whose output fits in p is transformed straight into p on this
// goroutine (no copy of its bytes), the others are copied from their
// worker's output once ready.
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
		ch, ok := <-s.order
		if !ok {
			if s.err = s.perr; s.err == nil {
				s.err = io.EOF
			}
			break
		}
		size := ch.rows * s.outRow
		if ch.err == nil && int64(len(p)-n) >= size && ch.claimed.CompareAndSwap(false, true) {
			s.fn(p[n:n+int(size)], s.to, ch.in, ch.r0, ch.r0+ch.rows)
			n += int(size)
			s.c.progressAdd(int64(len(ch.in)))
			s.doneWith(ch)
			continue
		}
		<-ch.ready
		if ch.err != nil {
			s.err = ch.err
			s.free <- ch
			break
		}
		s.cur, s.part = ch, ch.out
	}
	s.release()
	if n > 0 {
		return n, nil
	}
	return 0, s.err
}

// release hands the current block back to the reader once its output is
// read.
func (s *rowStream) release() {
	if s.cur != nil && len(s.part) == 0 {
		s.c.progressAdd(int64(len(s.cur.in)))
		s.free <- s.cur
		s.cur = nil
	}
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
		s.free <- s.cur
		s.cur, s.part = nil, nil
	}
	for ch := range s.order {
		<-ch.ready
		s.free <- ch
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
