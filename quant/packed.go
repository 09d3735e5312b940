package quant

import (
	"encoding/binary"
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// compressed-tensors' integer formats:
//
//   - `pack-quantized`: `weight_packed` I32 [out, ceil(in*bits/32)], each
//     row a dense little-endian bit stream of (q + 2^(bits-1)), element i
//     at bit i*bits (fields straddle words for 3, 5, 6, 7 bits);
//     `weight_shape` [2] the logical shape; `weight_scale` [out, G] (G = 1
//     for the channel strategy, in/group_size for group, or [1] / [] for
//     one tensor-wide scale); when asymmetric, `weight_zero_point` I32
//     [ceil(out*bits/32), G], each column of zero points packed the same
//     way down the rows (packed_dim=0), or stored as is (int8, the scale's
//     shape) for the tensor strategy.
//   - `int-quantized`: `weight` I8 [out, in] as is, `weight_zero_point` I8
//     of the scale's shape when asymmetric.
//
// Value = (q - zp) * scale[row, col / group_size], in the scale's dtype
// upstream; DequantRows gives the float32 product, which is exact for
// bfloat16 and float16 scales (so rounding it to the scale's dtype gives
// upstream's value) and upstream's own arithmetic for float32 scales.
//
// Upstream (https://github.com/vllm-project/compressed-tensors):
// compressors/pack_quantized/base.py decompress, pack_quantized/helpers.py
// pack_to_int32 / unpack_from_int32, compressors/naive_quantized/base.py,
// quantization/lifecycle/forward_helpers.py _process_group / _dequantize.
// Activation ordering: `weight_g_idx` I32 or I64 [in] gives each input
// column its group (forward.py _process_quantization: the columns are
// taken in argsort(g_idx) order, cut into groups of group_size, and put
// back), so column c uses scale[row, g_idx[c]] (and that zero point); a
// g_idx holding -1 is column order, as upstream's is_column_order, and a
// channel or tensor-wide scale ignores it (dequantize infers no groups
// from it). Every group must hold group_size columns (upstream's
// equal-size groups); CheckGIdx and DequantRowsGIdx check it.

// PackedIntLayout is a checked compressed-tensors integer weight.
type PackedIntLayout struct {
	Rows, Cols int
	Bits       int  // 1..8
	Packed     bool // pack-quantized (int32 words); false: int-quantized (int8 as is)
	Groups     int  // scale columns per row (1: channel or tensor)
	TensorWide bool // one scale (and zero point) for the whole tensor
	ZeroPoint  int  // 0: symmetric; 1: int32 packed down the rows; 2: int8 as is
	ScaleDType dtype.DType
	GIdx       dtype.DType // weight_g_idx's dtype (Int32 or Int64); Invalid without one
}

const (
	zpNone = iota
	zpPacked
	zpInt8
)

// CheckPackedInt validates a compressed-tensors integer weight: weight
// is `weight_packed` (I32; shape is then the decoded `weight_shape`) or
// the int-quantized `weight` (I8; shape nil), bits the scheme's num_bits,
// zeroPoint nil when symmetric.
func CheckPackedInt(weight CodecTensor, shape []int64, bits int, scale CodecTensor, zeroPoint *CodecTensor) (PackedIntLayout, error) {
	const scheme = "compressed-tensors"
	var l PackedIntLayout
	if weight.DType == dtype.Int8 {
		wd, err := codecShape(scheme, weight, 2, dtype.Int8)
		if err != nil {
			return l, err
		}
		if bits < 1 || bits > 8 {
			return l, codecErr(scheme, weight, "num_bits %d for an int8 weight", bits)
		}
		l = PackedIntLayout{Rows: wd[0], Cols: wd[1], Bits: 8}
	} else {
		wd, err := codecShape(scheme, weight, 2, dtype.Int32)
		if err != nil {
			return l, err
		}
		if bits < 1 || bits > 8 {
			return l, codecErr(scheme, weight, "num_bits %d, want 1 to 8", bits)
		}
		sd, err := codecShape(scheme, CodecTensor{weight.Name + " (weight_shape)", weight.DType, shape}, 2)
		if err != nil {
			return l, err
		}
		l = PackedIntLayout{Rows: sd[0], Cols: sd[1], Bits: bits, Packed: true}
		if wd[0] != l.Rows || wd[1] != codecCeilDiv(l.Cols*bits, 32) {
			return l, codecErr(scheme, weight, "shape %v, want [%d %d] for weight_shape %v at %d bits", weight.Shape, l.Rows, codecCeilDiv(l.Cols*bits, 32), shape, bits)
		}
	}
	sd, err := codecShape(scheme, scale, -1, codecScaleDTypes...)
	if err != nil {
		return l, err
	}
	l.ScaleDType = scale.DType
	switch {
	case len(sd) == 0 || len(sd) == 1 && sd[0] == 1:
		l.Groups, l.TensorWide = 1, true
	case len(sd) == 2 && sd[0] == l.Rows && sd[1] >= 1 && l.Cols%sd[1] == 0:
		l.Groups = sd[1]
	default:
		return l, codecErr(scheme, scale, "shape %v does not divide the weight [%d %d] into groups", scale.Shape, l.Rows, l.Cols)
	}
	if zeroPoint == nil {
		return l, nil
	}
	zd, err := codecShape(scheme, *zeroPoint, -1, dtype.Int8, dtype.Int32)
	if err != nil {
		return l, err
	}
	switch {
	case zeroPoint.DType == dtype.Int8 && len(zd) == len(sd) && equalInts(zd, sd):
		l.ZeroPoint = zpInt8
	case zeroPoint.DType == dtype.Int32 && l.Packed && !l.TensorWide && len(zd) == 2 && zd[0] == codecCeilDiv(l.Rows*l.Bits, 32) && zd[1] == l.Groups:
		l.ZeroPoint = zpPacked
	default:
		return l, codecErr(scheme, *zeroPoint, "%s %v does not match weight_scale %v", zeroPoint.DType, zeroPoint.Shape, scale.Shape)
	}
	return l, nil
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// Shape is the logical weight's shape [Rows, Cols].
func (l PackedIntLayout) Shape() []int64 { return []int64{int64(l.Rows), int64(l.Cols)} }

// CheckGIdx validates weight_g_idx (activation ordering) for a checked
// layout: I32 or I64 of shape [Cols]; its values are checked as they are
// decoded (DequantRowsGIdx).
func (l *PackedIntLayout) CheckGIdx(gIdx CodecTensor) error {
	d, err := codecShape("compressed-tensors", gIdx, 1, dtype.Int32, dtype.Int64)
	if err != nil {
		return err
	}
	if d[0] != l.Cols {
		return codecErr("compressed-tensors", gIdx, "shape %v, want [%d] (one group index per input column)", gIdx.Shape, l.Cols)
	}
	l.GIdx = gIdx.DType
	return nil
}

// groupMap decodes weight_g_idx into each column's group, nil for column
// order (no g_idx, a -1 in it, or a scale without groups). An index
// outside [0, Groups), or a group not of Cols/Groups columns, is an
// ErrCodecBuffer.
func (l PackedIntLayout) groupMap(gIdx []byte) ([]int32, error) {
	if l.GIdx == dtype.Invalid || l.TensorWide || l.Groups <= 1 {
		return nil, nil
	}
	return gIdxGroups(l.GIdx, gIdx, l.Cols, l.Groups)
}

// gIdxGroups decodes weight_g_idx (d: Int32 or Int64) into each of cols
// columns' group, nil for column order (a -1 in it, upstream's
// is_column_order). An index outside [0, groups), or a group not of
// cols/groups columns, is an ErrCodecBuffer: upstream cuts the columns,
// sorted by group, into groups of group_size, so unequal groups would
// take another group's scale for some columns (which ones, the order of
// an unstable sort decides).
func gIdxGroups(d dtype.DType, gIdx []byte, cols, groups int) ([]int32, error) {
	es := d.Size()
	if len(gIdx) != cols*es {
		return nil, fmt.Errorf("%w: weight_g_idx has %d bytes, want %d", ErrCodecBuffer, len(gIdx), cols*es)
	}
	at := func(c int) int64 {
		if es == 8 {
			return int64(binary.LittleEndian.Uint64(gIdx[8*c:]))
		}
		return int64(int32(binary.LittleEndian.Uint32(gIdx[4*c:])))
	}
	for c := 0; c < cols; c++ {
		if at(c) == -1 {
			return nil, nil // not set: column order, as upstream's is_column_order
		}
	}
	m := make([]int32, cols)
	count := make([]int, groups)
	for c := range m {
		g := at(c)
		if g < 0 || g >= int64(groups) {
			return nil, fmt.Errorf("%w: weight_g_idx[%d] = %d, outside the %d groups", ErrCodecBuffer, c, g, groups)
		}
		m[c] = int32(g)
		count[g]++
	}
	for g, n := range count {
		if n != cols/groups {
			return nil, fmt.Errorf("%w: weight_g_idx gives group %d %d columns, want %d (groups of group_size)", ErrCodecBuffer, g, n, cols/groups)
		}
	}
	return m, nil
}

// DequantRowsGIdx is DequantRows with weight_g_idx's data (activation
// ordering; the layout's CheckGIdx set its dtype).
func (l PackedIntLayout) DequantRowsGIdx(dst []float32, weight, scale, zeroPoint, gIdx []byte, r0, r1 int) error {
	m, err := l.groupMap(gIdx)
	if err != nil {
		return err
	}
	return l.dequantRows(dst, weight, scale, zeroPoint, m, r0, r1)
}

// DequantRows decodes rows [r0, r1) into dst ((r1-r0)*Cols float32s)
// from the whole weight, scale and zero-point data (zeroPoint nil when
// symmetric), the columns' groups in order.
func (l PackedIntLayout) DequantRows(dst []float32, weight, scale, zeroPoint []byte, r0, r1 int) error {
	return l.dequantRows(dst, weight, scale, zeroPoint, nil, r0, r1)
}

// dequantRows decodes rows with each column's group from groupOf (nil:
// column order).
func (l PackedIntLayout) dequantRows(dst []float32, weight, scale, zeroPoint []byte, groupOf []int32, r0, r1 int) error {
	wordsPerRow := codecCeilDiv(l.Cols*l.Bits, 32)
	wantW := l.Rows * wordsPerRow * 4
	if !l.Packed {
		wantW = l.Rows * l.Cols
	}
	nScales := l.Rows * l.Groups
	if l.TensorWide {
		nScales = 1
	}
	wantZ := 0
	switch l.ZeroPoint {
	case zpInt8:
		wantZ = nScales
	case zpPacked:
		wantZ = codecCeilDiv(l.Rows*l.Bits, 32) * l.Groups * 4
	}
	if err := codecRows(dst, r0, r1, l.Rows, l.Cols,
		codecBuf{"weight", weight, wantW},
		codecBuf{"weight_scale", scale, nScales * l.ScaleDType.Size()},
		codecBuf{"weight_zero_point", zeroPoint, wantZ}); err != nil {
		return err
	}
	gs := l.Cols / l.Groups
	off := int32(1) << (l.Bits - 1)
	for r := r0; r < r1; r++ {
		si := r * l.Groups
		if l.TensorWide {
			si = 0
		}
		sc := codecFloats(l.ScaleDType, scale[si*l.ScaleDType.Size():], l.Groups)
		out := dst[(r-r0)*l.Cols : (r-r0+1)*l.Cols]
		zps := make([]int32, l.Groups)
		for g := range zps {
			switch l.ZeroPoint {
			case zpInt8:
				zps[g] = int32(int8(zeroPoint[si+g]))
			case zpPacked:
				zps[g] = int32(codecField(zeroPoint, g*4, 4*l.Groups, r*l.Bits, l.Bits)) - off
			}
		}
		for c := range out {
			g := c / gs
			if groupOf != nil {
				g = int(groupOf[c])
			}
			var q int32
			if l.Packed {
				q = int32(codecField(weight, r*wordsPerRow*4, 4, c*l.Bits, l.Bits)) - off
			} else {
				q = int32(int8(weight[r*l.Cols+c]))
			}
			out[c] = float32(q-zps[g]) * sc[g]
		}
	}
	return nil
}
