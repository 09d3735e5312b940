package quant

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// maxBlock bounds a block or group size: larger ones are refused as
// ErrUnknownLayout before any arithmetic on them.
const maxBlock = 1 << 30

// gridCodec dequantizes a 2-D float8 weight [rows, cols] whose scales form
// a grid [ceil(rows/bh), ceil(cols/bw)]: element (r, c) is
// code(r, c) * scale[r/bh, c/bw], the last blocks of a row or column
// ragged. Per-tensor (bh=rows, bw=cols), per-channel (bh=1, bw=cols),
// per-group (bh=1, bw=group) and block scales are all such grids. The
// product is taken in float32 and, when round is float16 or bfloat16,
// rounded to it (compressed-tensors multiplies in the scale's dtype).
type gridCodec struct {
	rows, cols int64
	bh, bw     int64
	sc         int64       // scale columns
	scale      dtype.DType // element type of the scales
	round      dtype.DType // Float32, or the dtype the product is rounded to
	lut        *[256]float32
	vec        *fp8Consts // the vector decode's constants (fp8_vec.go)
}

// CodeSpan: one byte per float8 element.
func (c *gridCodec) CodeSpan(first, n int64) (int64, int64) { return first, first + n }

// Dequantize walks the range row segment by row segment and, within a
// row, block by block, decoding each block's scale once.
func (c *gridCodec) Dequantize(dst []float32, first int64, codes []byte, comps [][]byte) error {
	scales, err := c.check(int64(len(dst)), first, codes, comps)
	if err != nil {
		return err
	}
	ssz := int64(c.scale.Size())
	lut := c.lut
	i := int64(0)
	for i < int64(len(dst)) {
		e := first + i
		r, col := e/c.cols, e%c.cols
		rowBase := (r / c.bh) * c.sc
		end := min(int64(len(dst)), i+c.cols-col) // end of this row segment in dst
		for i < end {
			blk := col / c.bw
			n := min(end-i, (blk+1)*c.bw-col)
			s := dtype.ToFloat32(c.scale, scales[(rowBase+blk)*ssz:])
			d, q := dst[i:i+n], codes[i:i+n]
			switch c.round {
			case dtype.BFloat16:
				for j, b := range q {
					d[j] = dtype.BF16ToF32(dtype.F32ToBF16(lut[b] * s))
				}
			case dtype.Float16:
				for j, b := range q {
					d[j] = dtype.F16ToF32(dtype.F32ToF16(lut[b] * s))
				}
			default:
				for j, b := range q {
					d[j] = lut[b] * s
				}
			}
			i += n
			col += n
		}
	}
	return nil
}

// f8Tables maps a float8 dtype to the float32 value of each code.
var f8Tables = func() map[dtype.DType]*[256]float32 {
	m := map[dtype.DType]*[256]float32{}
	for _, d := range []dtype.DType{dtype.Float8E4M3FN, dtype.Float8E5M2} {
		var t [256]float32
		for b := range t {
			t[b] = float32(dtype.Float8ToFloat64(d, byte(b)))
		}
		m[d] = &t
	}
	return m
}()

// newGrid checks a float8 weight and its scale against a grid of
// bh x bw blocks and returns the codec. round is the dtype products are
// rounded to (Float32: none).
func newGrid(w, scale Stored, bh, bw int64, round dtype.DType) (*gridCodec, error) {
	lut := f8Tables[w.DType]
	if lut == nil {
		return nil, fmt.Errorf("%w: weight is %s, not float8_e4m3fn or float8_e5m2", ErrUnknownLayout, w.DType)
	}
	if len(w.Shape) != 2 || w.Shape[0] <= 0 || w.Shape[1] <= 0 || numel(w.Shape) < 0 {
		return nil, fmt.Errorf("%w: weight of shape %s: a 2-D weight is expected", ErrUnknownLayout, shapeText(w.Shape))
	}
	if bh <= 0 || bw <= 0 || bh > maxBlock || bw > maxBlock {
		return nil, fmt.Errorf("%w: block %dx%d (sizes from 1 to %d)", ErrUnknownLayout, bh, bw, maxBlock)
	}
	switch scale.DType {
	case dtype.Float32, dtype.BFloat16, dtype.Float16:
	default:
		return nil, fmt.Errorf("%w: scale %s is %s, not float32, bfloat16 or float16", ErrCompanionShape, scale.Name, scale.DType)
	}
	rows, cols := w.Shape[0], w.Shape[1]
	sr, sc := (rows+bh-1)/bh, (cols+bw-1)/bw
	if !gridShape(scale.Shape, sr, sc) {
		return nil, fmt.Errorf("%w: scale %s has shape %s, want [%d, %d] for a %s weight in %dx%d blocks",
			ErrCompanionShape, scale.Name, shapeText(scale.Shape), sr, sc, shapeText(w.Shape), bh, bw)
	}
	return &gridCodec{rows: rows, cols: cols, bh: bh, bw: bw, sc: sc, scale: scale.DType, round: round, lut: lut, vec: fp8VecConsts(w.DType)}, nil
}

// gridShape reports whether shape holds sr x sc scales: [sr, sc], or for
// a single scale also [] and [1], and for one column [sr].
func gridShape(shape []int64, sr, sc int64) bool {
	switch len(shape) {
	case 0:
		return sr == 1 && sc == 1
	case 1:
		return sc == 1 && shape[0] == sr
	case 2:
		return shape[0] == sr && shape[1] == sc
	}
	return false
}
