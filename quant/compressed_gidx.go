package quant

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// compressed-tensors float-quantized weights with activation ordering:
// `M.weight_g_idx` (I32 or I64 [cols]) gives each input column its
// group. Upstream's _process_quantization
// (src/compressed_tensors/quantization/lifecycle/forward.py, strategy
// group) sorts the columns by g_idx (perm = argsort(g_idx)), cuts them
// into groups of group_size, computes x_q.to(scale.dtype) * scale[:, g]
// per group and puts the columns back (argsort(perm)); a g_idx holding
// -1 means column order. With every group of group_size columns that is
// W[r, c] = code(r, c) * scale[r, g_idx[c]] rounded to the scale's dtype,
// which is what gidxCodec computes (gIdxGroups refuses the rest). Other
// strategies never read g_idx upstream; it is consumed there.

// newGIdxCodec wraps the group codec g of a float8 weight [rows, cols]
// (bh 1, bw group_size) for a weight_g_idx gi: companions [scale, g_idx].
func newGIdxCodec(g *gridCodec, gi Stored) (Codec, error) {
	if gi.DType != dtype.Int32 && gi.DType != dtype.Int64 {
		return nil, fmt.Errorf("%w: weight_g_idx %s is %s, not int32 or int64", ErrCompanionShape, gi.Name, gi.DType)
	}
	if len(gi.Shape) != 1 || gi.Shape[0] != g.cols {
		return nil, fmt.Errorf("%w: weight_g_idx %s has shape %s, want [%d] (one group per input column)", ErrCompanionShape, gi.Name, shapeText(gi.Shape), g.cols)
	}
	gd := gi.DType
	return &rowsCodec{rows: g.rows, cols: g.cols, codeBytes: g.rows * g.cols, rowSpan: rowBytes(g.cols),
		dec: func(dst []float32, codes []byte, comps [][]byte, r0, r1 int) error {
			return g.dequantGIdx(dst, codes, comps, gd, r0, r1)
		}}, nil
}

// dequantGIdx decodes rows [r0, r1) of the weight, codes holding just
// those rows, comps [scale, g_idx].
func (c *gridCodec) dequantGIdx(dst []float32, codes []byte, comps [][]byte, gd dtype.DType, r0, r1 int) error {
	if len(comps) != 2 {
		return fmt.Errorf("%w: %d companions, want weight_scale and weight_g_idx", ErrCodecBuffer, len(comps))
	}
	cols, sc, ssz := int(c.cols), int(c.sc), c.scale.Size()
	if len(comps[0]) != int(c.rows)*sc*ssz || len(codes) != (r1-r0)*cols || len(dst) != (r1-r0)*cols {
		return fmt.Errorf("%w: rows [%d, %d) of %dx%d with %d scale bytes", ErrCodecBuffer, r0, r1, c.rows, c.cols, len(comps[0]))
	}
	m, err := gIdxGroups(gd, comps[1], cols, sc)
	if err != nil {
		return err
	}
	if m == nil { // column order
		m = make([]int32, cols)
		for j := range m {
			m[j] = int32(int64(j) / c.bw)
		}
	}
	p := f32Bufs.Get(sc)
	defer f32Bufs.Put(p)
	rowScale := *p
	for r := r0; r < r1; r++ {
		dtype.DecodeFloat32(c.scale, rowScale, comps[0][r*sc*ssz:(r+1)*sc*ssz])
		out, q := dst[(r-r0)*cols:(r-r0+1)*cols], codes[(r-r0)*cols:(r-r0+1)*cols]
		for j, b := range q {
			out[j] = c.product(c.lut[b], rowScale[m[j]])
		}
	}
	return nil
}
