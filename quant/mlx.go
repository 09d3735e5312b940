package quant

import (
	"github.com/ckpt-dev/ckpt/dtype"
)

// MLX affine quantization as mlx-lm saves it: `weight` U32 [..., out,
// in*bits/32], each row a dense little-endian bit stream of codes
// (element j at bit j*bits: for 2, 4, 8 bits bits*(j % (32/bits)) of word
// j/(32/bits); for 3, 5 and 6 bits 8, 8 and 4 codes in 3, 5 and 3 bytes,
// fields straddling words), `scales` and `biases` [..., out, in/group]
// in the model's float dtype; w = scale * q + bias per group of
// group_size (32, 64 or 128) along the last axis. DequantRows computes
// float32(scale*q) + bias in float32 (two roundings, never fused).
//
// Upstream: ml-explore/mlx mlx/ops.cpp (quantize / dequantize, affine),
// mlx/backend/cpu/quantized.cpp (extract_bits, pack factors),
// https://github.com/ml-explore/mlx; mlx-lm mlx_lm/utils.py saves the
// three tensors. MLX computes in the scales' dtype on its own devices;
// the float32 result here rounds to within one bfloat16/float16 ulp of it.

// MLXLayout is a checked MLX affine weight, flattened to [Rows, Cols].
type MLXLayout struct {
	Prefix     []int // leading dimensions, the last one the output rows
	Cols       int
	Bits       int
	GroupSize  int
	ScaleDType dtype.DType
}

// CheckMLX validates weight, scales and biases for the config's bits and
// group_size.
func CheckMLX(weight, scales, biases CodecTensor, bits, groupSize int) (MLXLayout, error) {
	const scheme = "mlx"
	wd, err := codecShape(scheme, weight, -1, dtype.Uint32)
	if err != nil {
		return MLXLayout{}, err
	}
	if len(wd) < 2 {
		return MLXLayout{}, codecErr(scheme, weight, "shape %v, want at least 2 dimensions", weight.Shape)
	}
	switch bits {
	case 2, 3, 4, 5, 6, 8:
	default:
		return MLXLayout{}, codecErr(scheme, weight, "bits %d, want 2, 3, 4, 5, 6 or 8", bits)
	}
	if groupSize != 32 && groupSize != 64 && groupSize != 128 {
		return MLXLayout{}, codecErr(scheme, weight, "group_size %d, want 32, 64 or 128", groupSize)
	}
	n := len(wd)
	l := MLXLayout{Prefix: wd[:n-1], Cols: wd[n-1] * 32 / bits, Bits: bits, GroupSize: groupSize}
	if wd[n-1]*32%bits != 0 || l.Cols%groupSize != 0 {
		return MLXLayout{}, codecErr(scheme, weight, "shape %v: %d words per row are not whole groups of %d %d-bit codes", weight.Shape, wd[n-1], groupSize, bits)
	}
	for _, c := range []CodecTensor{scales, biases} {
		sd, err := codecShape(scheme, c, n, codecScaleDTypes...)
		if err != nil {
			return MLXLayout{}, err
		}
		if !equalInts(sd[:n-1], wd[:n-1]) || sd[n-1] != l.Cols/groupSize {
			return MLXLayout{}, codecErr(scheme, c, "shape %v, want %v with %d groups", c.Shape, weight.Shape[:n-1], l.Cols/groupSize)
		}
	}
	if scales.DType != biases.DType {
		return MLXLayout{}, codecErr(scheme, biases, "dtype %s, scales are %s", biases.DType, scales.DType)
	}
	l.ScaleDType = scales.DType
	return l, nil
}

// Rows is the number of rows (the product of Prefix).
func (l MLXLayout) Rows() int {
	n := 1
	for _, d := range l.Prefix {
		n *= d
	}
	return n
}

// Shape is the logical weight's shape [Prefix..., Cols].
func (l MLXLayout) Shape() []int64 {
	s := make([]int64, 0, len(l.Prefix)+1)
	for _, d := range l.Prefix {
		s = append(s, int64(d))
	}
	return append(s, int64(l.Cols))
}

// DequantRows decodes rows [r0, r1) into dst from the whole weight,
// scales and biases data.
func (l MLXLayout) DequantRows(dst []float32, weight, scales, biases []byte, r0, r1 int) error {
	rows, groups := l.Rows(), l.Cols/l.GroupSize
	wpr := l.Cols * l.Bits / 32
	ss := l.ScaleDType.Size()
	if err := codecRows(dst, r0, r1, rows, l.Cols,
		codecBuf{"weight", weight, rows * wpr * 4},
		codecBuf{"scales", scales, rows * groups * ss},
		codecBuf{"biases", biases, rows * groups * ss}); err != nil {
		return err
	}
	for r := r0; r < r1; r++ {
		sc := codecFloats(l.ScaleDType, scales[r*groups*ss:], groups)
		bi := codecFloats(l.ScaleDType, biases[r*groups*ss:], groups)
		out := dst[(r-r0)*l.Cols : (r-r0+1)*l.Cols]
		for j := range out {
			g := j / l.GroupSize
			q := float32(codecField(weight, r*wpr*4, 4, j*l.Bits, l.Bits))
			out[j] = float32(sc[g]*q) + bi[g]
		}
	}
	return nil
}
