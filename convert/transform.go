package convert

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/par"
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

// transformedReader returns t's transformed values encoded as to, read
// through the input's checks (cr verifies them once read).
func (c *config) transformedReader(ctx context.Context, t *statedict.Tensor, to dtype.DType) (io.ReadCloser, *checkedReader, error) {
	rc, cr, err := c.checks.tensorReader(ctx, t, true)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	n := t.NumEl()
	raw := make([]byte, t.NBytes())
	if _, err := io.ReadFull(ctxReader{ctx, rc}, raw); err != nil {
		return nil, nil, &TensorError{Name: t.Name, Err: err}
	}
	c.progressAdd(int64(len(raw)))
	vals := make([]float32, n)
	fs, ts := t.DType.Size(), to.Size()
	par.Range(int(n), castPiece, func(lo, hi int) { dtype.DecodeFloat32(t.DType, vals[lo:hi], raw[lo*fs:hi*fs]) })
	raw = nil
	if err := c.transform.Apply(ctx, t, vals); err != nil {
		return nil, nil, &TensorError{Name: t.Name, Err: err}
	}
	out := make([]byte, n*int64(ts))
	par.Range(int(n), castPiece, func(lo, hi int) { dtype.EncodeFloat32(to, out[lo*ts:hi*ts], vals[lo:hi]) })
	return io.NopCloser(bytes.NewReader(out)), cr, nil
}
