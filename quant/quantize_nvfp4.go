package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// NVFP4 quantization in compressed-tensors' nvfp4-pack-quantized layout
// (nvfp4.go reads it): `X.weight_packed` U8 [R, C/2], `X.weight_scale`
// float8_e4m3fn [R, C/16], `X.weight_global_scale` float32 [1].
//
// Upstream (vllm-project/compressed-tensors, llm-compressor's NVFP4
// scheme, strategy tensor_group, group_size 16):
//   - quantization/utils/helpers.py generate_gparam: global_scale =
//     448 * 6 / max(|min|, |max|) over the whole tensor, min and max
//     clipped to include 0; the division is a Python float over a tensor
//     in the weight's dtype, which torch computes as reciprocal() * 2688,
//     each rounded to that dtype, then .to(float32);
//   - calculate_qparams with the global scale: per group of 16,
//     scale = global_scale * (max_val_pos / 6) (the inner division in the
//     weight's dtype, the product a float32 [1] tensor times it, so
//     float32), clamp(-448, 448), .to(float8_e4m3fn), and a zero scale
//     becomes 0.125;
//   - forward.py _quantize: scale = fp8 scale / global_scale (float32),
//     x / scale in float32, then FP4_E2M1_DATA.cast_to_fp4: clamp to
//     [-6, 6] and round to the nearest E2M1 value, ties to the even code
//     (thresholds 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5);
//   - compressors/nvfp4 pack_fp4_to_uint8: the E2M1 index with the sign
//     in bit 3 (torch.signbit: cast_to_fp4 returns |v| * sign(x), so a
//     small negative x that rounds to zero is -0.0, code 8, while x = -0.0
//     has sign 0 and gives +0, code 0), the even element in the low nibble.
// NaN elements give the code of the value NaN compares as: cast_to_fp4
// keeps NaN and pack's argmin picks index 0, so code 0 or 8 by the sign
// bit. A NaN max makes the global scale NaN and every code of the tensor
// follow from NaN arithmetic, as upstream.

const (
	fp4Max      = 6
	nvfp4GSNum  = fp8Max * fp4Max
	e4m3Eighth  = 0x20 // 0.125 in float8_e4m3fn
	nvfp4Groups = nvfp4Group
)

type nvfp4Quantizer struct {
	out        []Stored
	rows, cols int64
	dt         dtype.DType
	global     float32
	scales     []byte // float8_e4m3fn, one per group
	amax       []float32
}

func newNVFP4Quantizer(name string, dt dtype.DType, shape []int64) (WeightQuantizer, Skip) {
	r, c := shape[0], shape[1]
	if c%nvfp4Groups != 0 {
		return nil, Skip(fmt.Sprintf("shape %s: %d columns are not a whole number of %d-element groups", shapeText(shape), c, nvfp4Groups))
	}
	m := ModuleOf(name)
	q := &nvfp4Quantizer{rows: r, cols: c, dt: dt}
	q.out = []Stored{
		{Name: m + ".weight_packed", DType: dtype.Uint8, Shape: []int64{r, c / 2}},
		{Name: m + ".weight_scale", DType: dtype.Float8E4M3FN, Shape: []int64{r, c / nvfp4Groups}},
		{Name: m + ".weight_global_scale", DType: dtype.Float32, Shape: []int64{1}},
	}
	return q, ""
}

func (q *nvfp4Quantizer) Outputs() []Stored { return q.out }
func (q *nvfp4Quantizer) Rows() int64       { return q.rows }
func (q *nvfp4Quantizer) Cols() int64       { return q.cols }
func (q *nvfp4Quantizer) RowAlign() int64   { return 1 }

// Prepare finds every group's max magnitude (and so the tensor's), then
// the global scale and the group scales from them.
func (q *nvfp4Quantizer) Prepare(read RowReader) error {
	g := q.cols / nvfp4Groups
	q.amax = make([]float32, q.rows*g)
	err := forRowChunks(q, read, func(src []float32, r0, r1 int64) {
		for i := range (r1 - r0) * g {
			q.amax[r0*g+i] = absMax(src[i*nvfp4Groups:][:nvfp4Groups])
		}
	})
	if err != nil {
		return err
	}
	var m float32
	for _, a := range q.amax {
		if a > m || a != a {
			m = a
			if a != a {
				break
			}
		}
	}
	// A Python float over a tensor is tensor.reciprocal() * float in
	// torch (Tensor.__rtruediv__): two roundings in the weight's dtype.
	q.global = roundTo(q.dt, roundTo(q.dt, 1/m)*nvfp4GSNum)
	q.scales = make([]byte, len(q.amax))
	for i, a := range q.amax {
		s := clamp(q.global*roundTo(q.dt, a/fp4Max), -fp8Max, fp8Max)
		b := e4m3FromF32(s)
		if b&0x7f == 0 { // == 0, either sign
			b = e4m3Eighth
		}
		q.scales[i] = b
	}
	q.amax = nil
	return nil
}

func (q *nvfp4Quantizer) Companion(i int) []byte {
	if i == 1 {
		return q.scales
	}
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, math.Float32bits(q.global))
	return b
}

func (q *nvfp4Quantizer) CodeSpan(r0, r1 int64) (int64, int64) {
	return r0 * q.cols / 2, r1 * q.cols / 2
}

func (q *nvfp4Quantizer) Codes(dst []byte, src []float32, r0, r1 int64) {
	g := q.cols / nvfp4Groups
	for i := range (r1 - r0) * g {
		s := e4m3Table[q.scales[r0*g+i]] / q.global
		in := src[i*nvfp4Groups:][:nvfp4Groups]
		out := dst[i*nvfp4Groups/2:][:nvfp4Groups/2]
		for k := range out {
			out[k] = castFP4(in[2*k]/s) | castFP4(in[2*k+1]/s)<<4
		}
	}
}

// castFP4 is cast_to_fp4 followed by pack_fp4_to_uint8's index: the
// E2M1 code of x rounded to nearest, ties to even, saturating at 6. The
// code is the number of rounding thresholds (0.25, 0.75, 1.25, 1.75, 2.5,
// 3.5, 5; a tie goes to the even code) |x| passes, counted without
// branches (random data mispredicts a chain of them); NaN passes none.
func castFP4(x float32) byte {
	a := float32(math.Abs(float64(x)))
	c := b2u(a > 0.25) + b2u(a >= 0.75) + b2u(a > 1.25) + b2u(a >= 1.75) + b2u(a > 2.5) + b2u(a >= 3.5) + b2u(a > 5)
	// torch.sign(-0.0) is +0: -0.0 gives +0.
	return c | byte(math.Float32bits(x)>>31)&b2u(x != 0)<<3
}

// b2u is 1 for true, 0 for false.
func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}
