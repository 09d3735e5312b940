package quant

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Weights stacked along leading dimensions: MoE experts fused into one
// tensor [E, out, in] (transformers' fused expert layout, which its
// FineGrainedFP8 integration quantizes as FP8Experts: `gate_up_proj`
// [E, 2I, H] beside `gate_up_proj_scale_inv` [E, ceil(2I/bh), ceil(H/bw)],
// and down_proj likewise; Fp8Quantize._quantize_one of
// src/transformers/integrations/finegrained_fp8.py keeps the leading
// dimensions, each 2-D slice in its own blocks). The codecs of this
// package decode one 2-D weight; stackedCodec applies one to each slice,
// the slice's part of every companion beside it.

// stackedCodec decodes a weight of n slices, each inner's 2-D weight of
// elems elements and codeBytes stored bytes, whose companions hold
// compBytes[i] bytes per slice.
type stackedCodec struct {
	inner     Codec
	n         int64
	elems     int64
	codeBytes int64
	compBytes []int64
}

// CodeSpan covers the slices the range touches.
func (c *stackedCodec) CodeSpan(first, n int64) (int64, int64) {
	if n <= 0 || c.elems == 0 {
		return 0, 0
	}
	s0, s1 := first/c.elems, (first+n-1)/c.elems
	b, _ := c.inner.CodeSpan(first-s0*c.elems, min(n, (s0+1)*c.elems-first))
	l0 := max(first, s1*c.elems) - s1*c.elems
	_, e := c.inner.CodeSpan(l0, first+n-s1*c.elems-l0)
	return s0*c.codeBytes + b, s1*c.codeBytes + e
}

// Dequantize decodes the range slice by slice.
func (c *stackedCodec) Dequantize(dst []float32, first int64, codes []byte, comps [][]byte) error {
	return c.eachSlice(first, int64(len(dst)), codes, comps, func(i, k, local int64, codes []byte, comps [][]byte) error {
		return c.inner.Dequantize(dst[i:i+k], local, codes, comps)
	})
}

// dequantizeTo decodes the range slice by slice in one pass to dt where
// the inner codec has one (DequantizeTo stages in float32 where not).
func (c *stackedCodec) dequantizeTo(dt dtype.DType, dst []byte, first int64, codes []byte, comps [][]byte) (bool, error) {
	es := int64(dt.Size())
	return true, c.eachSlice(first, int64(len(dst))/es, codes, comps, func(i, k, local int64, codes []byte, comps [][]byte) error {
		return DequantizeTo(c.inner, dt, dst[i*es:(i+k)*es], local, codes, comps)
	})
}

// eachSlice checks the buffers for elements [first, first+n) and calls
// fn for each slice's part of the range: i and k its offset in the range
// and length, local its first element within the slice, with that
// slice's codes and companions.
func (c *stackedCodec) eachSlice(first, n int64, codes []byte, comps [][]byte, fn func(i, k, local int64, codes []byte, comps [][]byte) error) error {
	if first < 0 || first+n > c.n*c.elems {
		return fmt.Errorf("%w: elements [%d, %d) outside %d", ErrUnknownLayout, first, first+n, c.n*c.elems)
	}
	if len(comps) != len(c.compBytes) {
		return fmt.Errorf("%w: %d companions, want %d", ErrMissingCompanion, len(comps), len(c.compBytes))
	}
	for i, b := range comps {
		if int64(len(b)) != c.n*c.compBytes[i] {
			return fmt.Errorf("%w: companion %d has %d bytes, want %d", ErrCompanionShape, i, len(b), c.n*c.compBytes[i])
		}
	}
	base, end := c.CodeSpan(first, n)
	if int64(len(codes)) != end-base {
		return fmt.Errorf("%w: %d code bytes for elements [%d, %d), want %d", ErrUnknownLayout, len(codes), first, first+n, end-base)
	}
	sub := make([][]byte, len(comps))
	for i := int64(0); i < n; {
		s := (first + i) / c.elems
		local := first + i - s*c.elems
		k := min(n-i, c.elems-local)
		cb, ce := c.inner.CodeSpan(local, k)
		off := s*c.codeBytes + cb - base
		for j, b := range comps {
			sub[j] = b[s*c.compBytes[j] : (s+1)*c.compBytes[j]]
		}
		if err := fn(i, k, local, codes[off:off+ce-cb], sub); err != nil {
			return err
		}
		i += k
	}
	return nil
}

// newStackedGrid is newGrid for a float8 weight of any rank from 2: the
// leading dimensions stack 2-D weights, each in its own grid of blocks,
// and the scale has the same leading dimensions (transformers' FP8Experts).
func newStackedGrid(w, scale Stored, bh, bw int64, round dtype.DType) (Codec, error) {
	r := len(w.Shape)
	if r <= 2 {
		return newGrid(w, scale, bh, bw, round)
	}
	if len(scale.Shape) != r {
		return nil, fmt.Errorf("%w: scale %s has shape %s, want the weight's %d leading dimensions %s and a grid of blocks",
			ErrCompanionShape, scale.Name, shapeText(scale.Shape), r-2, shapeText(w.Shape[:r-2]))
	}
	n := numel(w.Shape[:r-2])
	for i := 0; i < r-2; i++ {
		if w.Shape[i] != scale.Shape[i] || w.Shape[i] <= 0 {
			return nil, fmt.Errorf("%w: scale %s has shape %s for a %s weight (leading dimensions differ or are empty)",
				ErrCompanionShape, scale.Name, shapeText(scale.Shape), shapeText(w.Shape))
		}
	}
	if n <= 0 || numel(w.Shape) < 0 {
		return nil, fmt.Errorf("%w: weight of shape %s", ErrUnknownLayout, shapeText(w.Shape))
	}
	slice, sc := w, scale
	slice.Shape, sc.Shape = w.Shape[r-2:], scale.Shape[r-2:]
	g, err := newGrid(slice, sc, bh, bw, round)
	if err != nil {
		return nil, err
	}
	return &stackedCodec{inner: g, n: n, elems: g.rows * g.cols, codeBytes: g.rows * g.cols,
		compBytes: []int64{numel(sc.Shape) * int64(sc.DType.Size())}}, nil
}
