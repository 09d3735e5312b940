package lora

import (
	"context"
	"fmt"
	"math"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Apply merges into vals, the values of base tensor t as float32 in C
// order, every adapter's contribution to t, in adapter order: W + sum of
// w_i * scaling_i * delta_i, or the replacement, or for DoRA
// m / ||W + s*BA|| * (W + s*BA). Only t's own adapter tensors are read.
func (m *Merger) Apply(ctx context.Context, t *statedict.Tensor, vals []float32) error {
	for _, p := range m.parts[t.Name] {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		switch p.kind {
		case KindReplacement:
			err = replace(p.repl, vals)
		case KindBias:
			err = addBias(p, vals)
		default:
			err = addDelta(p, t, vals)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func replace(src *statedict.Tensor, vals []float32) error {
	v, err := floats(src)
	if err != nil {
		return fmt.Errorf("%s: %w", src.Name, err)
	}
	copy(vals, v)
	return nil
}

func addBias(p part, vals []float32) error {
	b, err := floats(p.m.biasB)
	if err != nil {
		return fmt.Errorf("%s: %w", p.m.biasB.Name, err)
	}
	s := float32(p.scale)
	for i := range vals {
		vals[i] += b[i] * s
	}
	return nil
}

// addDelta adds scale * B @ A to vals laid out as the base weight t.
func addDelta(p part, t *statedict.Tensor, vals []float32) error {
	ws := matrix(t.Shape)
	rows, cols := int(ws[0]), int(ws[1])
	f, err := p.factors(cols)
	if err != nil {
		return err
	}
	AddMatMul(vals, f.l, f.rm, rows, cols, f.r, f.s)
	f.release()
	if !p.dora {
		return nil
	}
	mag, err := floats(p.m.magnitude)
	if err != nil {
		return fmt.Errorf("%s: %w", p.m.magnitude.Name, err)
	}
	applyDoRA(vals, mag, rows, cols, p.rowsOK)
	return nil
}

// applyDoRA scales vals, W + s*BA as (rows, cols), by magnitude / norm,
// the L2 norm taken per output feature: over each row when rowsOut, over
// each column otherwise (DoraLinearLayer.get_weight_norm's
// torch.linalg.norm(weight, dim=1) of the (out, in) weight). The norm is
// accumulated in float64 and rounded to float32, as torch's float32
// reduction is (in some order) to float32.
func applyDoRA(vals, mag []float32, rows, cols int, rowsOut bool) {
	if rowsOut {
		parallel(rows, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				row := vals[i*cols : (i+1)*cols]
				var ss float64
				for _, v := range row {
					ss += float64(v) * float64(v)
				}
				f := mag[i] / float32(math.Sqrt(ss))
				for j := range row {
					row[j] *= f
				}
			}
		})
		return
	}
	ss := make([]float64, cols)
	for i := 0; i < rows; i++ {
		for j, v := range vals[i*cols : (i+1)*cols] {
			ss[j] += float64(v) * float64(v)
		}
	}
	f := make([]float32, cols)
	for j := range f {
		f[j] = mag[j] / float32(math.Sqrt(ss[j]))
	}
	parallel(rows, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := vals[i*cols : (i+1)*cols]
			for j := range row {
				row[j] *= f[j]
			}
		}
	})
}

// transpose returns the (cols, rows) transpose of m (rows, cols).
func transpose(m []float32, rows, cols int) []float32 {
	t := make([]float32, len(m))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			t[j*rows+i] = m[i*cols+j]
		}
	}
	return t
}
