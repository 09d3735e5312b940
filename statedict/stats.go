package statedict

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// ErrNoStats: statistics are not defined for the tensor's dtype (complex,
// quantized, packed sub-byte and bit types), or the tensor has no data
// (meta tensors, wrapper subclass shells).
var ErrNoStats = fmt.Errorf("statedict: no statistics for this dtype")

// Stats summarises a tensor's logical elements.
type Stats struct {
	Count int64   // elements read
	Min   float64 // over finite elements (NaN when there are none)
	Max   float64
	Mean  float64
	NaN   int64 // elements that are NaN
	Inf   int64 // elements that are +Inf or -Inf
}

// ComputeStats reads the tensor's logical elements (honouring offset,
// strides and byte order; half, bfloat16 and float8 decoded) and returns
// their statistics. progress, if not nil, is called with the number of
// bytes read since the previous call.
func ComputeStats(ctx context.Context, t *Tensor, progress func(n int64)) (Stats, error) {
	dec := dtype.Float64Decoder(t.DType)
	if dec == nil || t.Quant != nil {
		return Stats{}, &Error{Tensor: t.Name, Err: fmt.Errorf("%w (%s)", ErrNoStats, t.DType)}
	}
	if t.Storage == nil && t.NumEl() != 0 {
		return Stats{}, &Error{Tensor: t.Name, Err: fmt.Errorf("%w (a tensor without data)", ErrNoStats)}
	}
	st := Stats{Min: math.NaN(), Max: math.NaN(), Mean: math.NaN()}
	if t.NumEl() == 0 {
		return st, nil
	}
	// A broadcast view (expand: stride 0) repeats the elements of the
	// view without those dimensions: read each once and weight it, so the
	// cost is what the storage holds, not what the shape claims.
	full := t
	t, repeat := t.Distinct()
	st, err := computeStats(ctx, t, progress)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Tensor = full.Name
		}
		return st, err
	}
	st.Count *= repeat
	st.NaN *= repeat
	st.Inf *= repeat
	return st, nil
}

// Distinct returns the view of t's distinct element positions: t with
// every broadcast dimension (stride 0, size > 1, as Tensor.expand makes)
// reduced to size 1, and how many times each of its elements appears in
// t. For a tensor without broadcast dimensions it is t itself and 1.
func (t *Tensor) Distinct() (*Tensor, int64) {
	repeat := int64(1)
	if t.NumEl() < 0 {
		return t, 1
	}
	var shape []int64
	for d, s := range t.Shape {
		if s > 1 && d < len(t.Strides) && t.Strides[d] == 0 {
			if shape == nil {
				shape = append([]int64(nil), t.Shape...)
			}
			shape[d] = 1
			repeat *= s // no overflow: NumEl fits
		}
	}
	if shape == nil {
		return t, 1
	}
	v := *t
	v.Shape = shape
	return &v, repeat
}

func computeStats(ctx context.Context, t *Tensor, progress func(n int64)) (Stats, error) {
	st := Stats{Min: math.NaN(), Max: math.NaN(), Mean: math.NaN()}
	dec := dtype.Float64Decoder(t.DType)
	rc, err := t.Open()
	if err != nil {
		return st, err
	}
	defer rc.Close()
	es := t.DType.Size()
	buf := make([]byte, 1<<20/es*es)
	var sum, comp float64 // Kahan summation
	finite := int64(0)
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		n, err := io.ReadFull(rc, buf)
		n = n / es * es
		for i := 0; i < n; i += es {
			v := dec(buf[i : i+es])
			st.Count++
			switch {
			case math.IsNaN(v):
				st.NaN++
				continue
			case math.IsInf(v, 0):
				st.Inf++
				continue
			}
			if finite == 0 || v < st.Min {
				st.Min = v
			}
			if finite == 0 || v > st.Max {
				st.Max = v
			}
			finite++
			y := v - comp
			s := sum + y
			comp = (s - sum) - y
			sum = s
		}
		if progress != nil && n > 0 {
			progress(int64(n))
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return st, &Error{Tensor: t.Name, Err: err}
		}
	}
	if st.Count != t.NumEl() {
		return st, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: read %d of %d elements", ErrTruncated, st.Count, t.NumEl())}
	}
	if finite > 0 {
		st.Mean = sum / float64(finite)
	}
	return st, nil
}
