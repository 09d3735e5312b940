package convert

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/par"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TensorTransform replaces the values of some tensors on their way to
// the output, through the same outputs, names, casts and checks as any
// conversion: ckpt merge supplies one that adds LoRA deltas. A
// transformed tensor is read whole (its logical values, so a quantized
// input is seen dequantized), decoded to float32, handed to Apply, and
// encoded to its output dtype; the other tensors stream as usual.
type TensorTransform interface {
	// Transforms reports whether t's values are replaced. Convert asks
	// before anything is written; a transformed tensor must be floating,
	// contiguous and the only tensor over its whole storage.
	Transforms(t *statedict.Tensor) bool
	// Apply replaces vals, t's values as float32 in C order, in place.
	Apply(ctx context.Context, t *statedict.Tensor, vals []float32) error
}

// RowTransform is a TensorTransform that can replace some tensors' values
// a block of rows at a time, as they stream from input to output (no copy
// of the tensor in memory): ckpt merge's LoRA deltas on plain weights.
// The tensors it declines go through Apply whole.
type RowTransform interface {
	TensorTransform
	// RowCols returns the length of t's rows in elements when its values
	// can be replaced a block of whole rows at a time, 0 when they must go
	// through Apply.
	RowCols(t *statedict.Tensor) int64
	// MergeRows returns the function that replaces rows r0 to r1 of t:
	// src holds them as t's dtype, dst (their length in to) receives them
	// encoded as to. Each row is asked for once, in blocks that may come
	// in any order and from several goroutines at once (one block per
	// call; the caller spreads the blocks over the CPUs). release (not
	// nil) is called once no more rows will be asked for, so that the
	// transform can reuse what it holds for t.
	MergeRows(ctx context.Context, t *statedict.Tensor) (merge func(dst []byte, to dtype.DType, src []byte, r0, r1 int64), release func(), err error)
}

// WithTransform has t replace the values of the tensors it transforms
// (TensorTransform).
func WithTransform(t TensorTransform) Option { return func(c *options) { c.transform = t } }

// planTransforms asks the transform which tensors of ck it replaces and
// refuses, before anything is written, those it cannot be given whole.
func (c *config) planTransforms(ck *statedict.Checkpoint) error {
	if c.transform == nil {
		return nil
	}
	c.transformed = map[*statedict.Storage]*statedict.Tensor{}
	users := map[*statedict.Storage]int{}
	for _, t := range ck.Tensors {
		if t.Storage != nil {
			users[t.Storage]++
		}
	}
	for _, t := range ck.Tensors {
		if !c.transform.Transforms(t) {
			continue
		}
		switch {
		case t.Storage == nil || t.Meta:
			return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: a tensor without data cannot be transformed", ErrOption)}
		case !t.DType.IsFloat() || t.Layout != "" && t.Layout != statedict.Strided:
			return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: only dense floating tensors can be transformed, not %s %s", ErrOption, t.Layout, t.DType)}
		case t.DType.Size() > 4:
			return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: transforms work in float32; %s would lose precision", ErrOption, t.DType)}
		case !t.IsContiguous() || t.Offset != 0 || users[t.Storage] > 1 ||
			t.DType == t.Storage.DType && t.NBytes() != t.Storage.NBytes:
			return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: it shares its storage with other tensors or views part of it; it cannot be transformed alone", ErrOption)}
		}
		c.transformed[t.Storage] = t
	}
	return nil
}

// transformBuf holds one transformed tensor's raw bytes, float32 values
// and encoded output. Buffers are reused from one tensor to the next
// (transformBufs): a fresh gigabyte of float32s a tensor cost more in
// zeroing and page faults than the merge's arithmetic.
type transformBuf struct {
	raw, out []byte
	vals     []float32
}

var transformBufs sync.Pool // of *transformBuf

// growBytes returns b with length n, a new slice when its capacity is short
// (the contents are not kept).
func growBytes(b []byte, n int64) []byte {
	if int64(cap(b)) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// bufReader reads out and hands its buffers back to the pool when closed.
type bufReader struct {
	bytes.Reader
	buf *transformBuf
}

func (r *bufReader) Close() error {
	if r.buf != nil {
		transformBufs.Put(r.buf)
		r.buf = nil
	}
	return nil
}

// transformJob computes one transformed tensor's float32 values: read,
// decoded and handed to Apply, on its own goroutine so that the next
// tensor is computed while this one is written (transformAhead).
type transformJob struct {
	t      *statedict.Tensor
	cr     *checkedReader
	crc    bool // cr checks the storage's CRC32 (sourceChecks marked it done)
	buf    *transformBuf
	vals   []float32
	read   int64
	err    error
	done   chan struct{}
	cancel context.CancelFunc
}

// startTransform opens t through the input's checks on the caller's
// goroutine (sourceChecks is not safe for concurrent use) and computes its
// values on another.
func (c *config) startTransform(ctx context.Context, t *statedict.Tensor) (*transformJob, error) {
	rc, cr, err := c.checks.tensorReader(ctx, t, true)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	j := &transformJob{t: t, cr: cr, crc: cr.crc != nil, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(j.done)
		defer rc.Close()
		j.err = j.compute(ctx, rc, c.transform)
	}()
	return j, nil
}

func (j *transformJob) compute(ctx context.Context, rc io.Reader, tr TensorTransform) error {
	t := j.t
	n := t.NumEl()
	buf, _ := transformBufs.Get().(*transformBuf)
	if buf == nil {
		buf = &transformBuf{}
	}
	j.buf = buf
	fs := t.DType.Size()
	raw := growBytes(buf.raw, t.NBytes())
	buf.raw = raw
	if _, err := io.ReadFull(ctxReader{ctx, rc}, raw); err != nil {
		return &TensorError{Name: t.Name, Err: err}
	}
	j.read = int64(len(raw))
	if int64(cap(buf.vals)) < n {
		buf.vals = make([]float32, n)
	}
	vals := buf.vals[:n]
	par.Range(int(n), castPiece, func(lo, hi int) { dtype.DecodeFloat32(t.DType, vals[lo:hi], raw[lo*fs:hi*fs]) })
	if err := tr.Apply(ctx, t, vals); err != nil {
		return &TensorError{Name: t.Name, Err: err}
	}
	j.vals = vals
	return nil
}

// drop stops j and waits for it, returning its buffers; when its read was
// to check the storage's CRC32, the check is left to be done again.
func (c *config) drop(j *transformJob) {
	j.cancel()
	<-j.done
	if j.buf != nil {
		transformBufs.Put(j.buf)
	}
	if j.crc {
		delete(c.checks.crcDone, j.t.Storage)
	}
}

// transformAhead is the order in which one output file asks for its
// transformed tensors, and the job computing the next of them.
type transformAhead struct {
	next  map[*statedict.Tensor]*statedict.Tensor
	ahead *transformJob
}

// aheadOrder tells transformedReader the order in which the tensors ts
// (some transformed, some not) will be asked for, so that each
// transformed tensor is computed while the one before it is written. The
// returned function stops a computation still running (an output that
// fails half way); call it when the file is done.
func (c *config) aheadOrder(ts []*statedict.Tensor) func() {
	if c.transform == nil {
		return func() {}
	}
	a := &transformAhead{next: map[*statedict.Tensor]*statedict.Tensor{}}
	var prev *statedict.Tensor
	for _, t := range ts {
		if t == nil || c.transformed[t.Storage] != t || c.rowCols(t) > 0 {
			continue
		}
		if prev != nil {
			a.next[prev] = t
		}
		prev = t
	}
	c.ahead = a
	return func() {
		if a.ahead != nil {
			c.drop(a.ahead)
			a.ahead = nil
		}
		if c.ahead == a {
			c.ahead = nil
		}
	}
}

// transformedReader returns t's transformed values encoded as to, read
// through the input's checks (cr verifies them once read). With an order
// (aheadOrder), the next transformed tensor's values are computed while
// the caller writes these.
func (c *config) transformedReader(ctx context.Context, t *statedict.Tensor, to dtype.DType) (io.ReadCloser, *checkedReader, error) {
	if cols := c.rowCols(t); cols > 0 {
		return c.rowReader(ctx, t, to, cols)
	}
	a := c.ahead
	var j *transformJob
	if a != nil && a.ahead != nil {
		if a.ahead.t == t {
			j = a.ahead
		} else {
			c.drop(a.ahead)
		}
		a.ahead = nil
	}
	if j == nil {
		var err error
		if j, err = c.startTransform(ctx, t); err != nil {
			return nil, nil, err
		}
	}
	<-j.done
	j.cancel()
	if j.err != nil {
		if j.buf != nil {
			transformBufs.Put(j.buf)
		}
		return nil, nil, j.err
	}
	c.progressAdd(j.read)
	if a != nil && a.next[t] != nil {
		next, err := c.startTransform(ctx, a.next[t])
		if err != nil {
			transformBufs.Put(j.buf)
			return nil, nil, err
		}
		a.ahead = next
	}
	buf, vals, ts := j.buf, j.vals, to.Size()
	out := growBytes(buf.out, int64(len(vals))*int64(ts))
	buf.out = out
	par.Range(len(vals), castPiece, func(lo, hi int) { dtype.EncodeFloat32(to, out[lo*ts:hi*ts], vals[lo:hi]) })
	r := &bufReader{buf: buf}
	r.Reset(out)
	return r, j.cr, nil
}

// orderedSources returns the source tensors of a safetensors file's items
// in the order they are written (aheadOrder).
func orderedSources(order []safetensors.WriterTensor, byName map[string]*item) []*statedict.Tensor {
	ts := make([]*statedict.Tensor, len(order))
	for i, wt := range order {
		ts[i] = byName[wt.Name].src
	}
	return ts
}

// storageSources returns the transformed tensor of each storage of a .pth
// output, in order (nil for the others; aheadOrder).
func storageSources(c *config, storages []*pthStorage) []*statedict.Tensor {
	ts := make([]*statedict.Tensor, len(storages))
	for i, s := range storages {
		ts[i] = c.transformed[s.src]
	}
	return ts
}

// quantRows is the quantizer's row reader for t: its stored values, or,
// for a tensor the transform replaces, the transformed ones (a merged
// weight is quantized with its delta, not as the base stored it).
func (c *config) quantRows(ctx context.Context, sc *sourceChecks, t *statedict.Tensor, cols int64) (quant.RowReader, string) {
	if c.transform == nil || c.transformed[t.Storage] != t {
		return rowReader(ctx, sc, t, cols)
	}
	return (&transformedRows{ctx: ctx, c: c, t: t, cols: cols}).read, ""
}

// transformedRows serves rows of a transformed tensor, computed whole on
// the first read. The quantizer reads every row twice (its scales, then
// its codes): the values are let go after that, and computed again if
// asked for once more.
type transformedRows struct {
	ctx    context.Context
	c      *config
	t      *statedict.Tensor
	cols   int64
	mu     sync.Mutex
	vals   []float32
	served int64
}

func (r *transformedRows) read(dst []float32, r0, r1 int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.vals == nil {
		j, err := r.c.startTransform(r.ctx, r.t)
		if err != nil {
			return err
		}
		<-j.done
		j.cancel()
		err = j.err
		if err == nil {
			err = j.cr.verify(0) // the input's CRC32 and digest, as the writer checks the others
		}
		if err != nil {
			if j.buf != nil {
				transformBufs.Put(j.buf)
			}
			return err
		}
		r.vals = append([]float32(nil), j.vals...)
		transformBufs.Put(j.buf)
	}
	copy(dst, r.vals[r0*r.cols:r1*r.cols])
	if r.served += r1 - r0; r.served >= 2*int64(len(r.vals))/max(r.cols, 1) {
		r.vals, r.served = nil, 0
	}
	return nil
}
