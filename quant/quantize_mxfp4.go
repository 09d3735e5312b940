package quant

import (
	"fmt"
	"math"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
)

// MXFP4 quantization of gpt-oss MoE experts, the layout mxfp4.go reads:
// the BF16 model's `mlp.experts.gate_up_proj` [E, H, 2I] and
// `mlp.experts.down_proj` [E, I, H] become `<name>_blocks` U8
// [E, N, K/32, 16] and `<name>_scales` U8 [E, N, K/32] where [E, K, N] is
// the BF16 shape: the stored weight is the transpose, quantized along K.
// Only the experts are quantized, as upstream (gpt-oss's
// modules_to_not_convert: self_attn, mlp.router, embed_tokens, lm_head).
//
// Upstream: transformers src/transformers/integrations/mxfp4.py
// quantize_to_mxfp4 calls triton_kernels' downcast_to_mxfp(w, uint8,
// axis=1) on the [E, K, N] weight; its torch reference,
// triton_kernels/numerics_details/mxfp.py downcast_to_mxfp_torch (default
// DEQUANT_SCALE_ROUNDING_MODE ROUND_UP), is followed here bit for bit:
// in float32, per group of 32 along K, dequant_scale = amax / 6; its bits
// rounded up to a power of two, (bits + 0x7FFFFF) & 0x7F800000; the E8M0
// byte is those bits >> 23; quant_scale = 1 / that power (0 when it is
// 0); q = x * quant_scale; and q's float32 bits go to E2M1 by the
// reference's integer arithmetic (subnormal shift, then
// ((exp << 2 | mantissa >> 21) + 1) >> 1, capped at 7: round half away
// from zero on the code grid), the sign in bit 3, even element in the
// low nibble. NaN or Inf in a group gives an amax whose rounded bits are
// 0x00000000 (NaN) or 0x7F800000 (Inf): scale byte 0 or 255, and codes
// from NaN arithmetic (magnitude code 7), as the reference.

type mxfp4Quantizer struct {
	out     []Stored
	e, k, n int64
	scales  []byte // [E, N, K/32]
}

func newMXFP4Quantizer(name string, shape []int64) (WeightQuantizer, Skip) {
	if !strings.HasSuffix(name, "mlp.experts.gate_up_proj") && !strings.HasSuffix(name, "mlp.experts.down_proj") {
		return nil, Skip("mxfp4 quantizes the MoE experts only (mlp.experts.gate_up_proj, mlp.experts.down_proj)")
	}
	if len(shape) != 3 || shape[0] <= 0 || shape[1] <= 0 || shape[2] <= 0 {
		return nil, Skip(fmt.Sprintf("shape %s: experts [E, K, N] expected", shapeText(shape)))
	}
	if shape[1]%32 != 0 {
		return nil, Skip(fmt.Sprintf("shape %s: %d is not a whole number of 32-element groups", shapeText(shape), shape[1]))
	}
	q := &mxfp4Quantizer{e: shape[0], k: shape[1], n: shape[2]}
	g := q.k / 32
	q.out = []Stored{
		{Name: name + "_blocks", DType: dtype.Uint8, Shape: []int64{q.e, q.n, g, 16}},
		{Name: name + "_scales", DType: dtype.Uint8, Shape: []int64{q.e, q.n, g}},
	}
	return q, ""
}

func (q *mxfp4Quantizer) Outputs() []Stored { return q.out }
func (q *mxfp4Quantizer) Rows() int64       { return q.e * q.k }
func (q *mxfp4Quantizer) Cols() int64       { return q.n }

// RowAlign: one expert, whose [K, N] rows make [N, K/32] groups.
func (q *mxfp4Quantizer) RowAlign() int64 { return q.k }

// mxScaleBits is the reference's rounded dequant scale of a group: the
// float32 bits of amax/6 rounded up to a power of two.
func mxScaleBits(amax float32) uint32 {
	return (math.Float32bits(amax/fp4Max) + 0x007fffff) & 0x7f800000
}

func (q *mxfp4Quantizer) Prepare(read RowReader) error {
	g := q.k / 32
	q.scales = make([]byte, q.e*q.n*g)
	return forRowChunks(q, read, func(src []float32, r0, r1 int64) {
		for ex := r0 / q.k; ex < r1/q.k; ex++ {
			m := src[(ex*q.k-r0)*q.n:][:q.k*q.n]
			for j := int64(0); j < q.n; j++ {
				for gi := int64(0); gi < g; gi++ {
					var a float32
					for k := gi * 32; k < gi*32+32; k++ {
						x := float32(math.Abs(float64(m[k*q.n+j])))
						if x > a || x != x {
							a = x
							if x != x {
								break
							}
						}
					}
					q.scales[(ex*q.n+j)*g+gi] = byte(mxScaleBits(a) >> 23)
				}
			}
		}
	})
}

func (q *mxfp4Quantizer) Companion(int) []byte { return q.scales }

func (q *mxfp4Quantizer) CodeSpan(r0, r1 int64) (int64, int64) {
	return r0 / q.k * q.n * q.k / 2, r1 / q.k * q.n * q.k / 2
}

func (q *mxfp4Quantizer) Codes(dst []byte, src []float32, r0, r1 int64) {
	g := q.k / 32
	var col [32]float32
	for ex := r0 / q.k; ex < r1/q.k; ex++ {
		m := src[(ex*q.k-r0)*q.n:][:q.k*q.n]
		d := dst[(ex-r0/q.k)*q.n*q.k/2:][:q.n*q.k/2]
		for j := int64(0); j < q.n; j++ {
			for gi := int64(0); gi < g; gi++ {
				sb := uint32(q.scales[(ex*q.n+j)*g+gi]) << 23
				var qs float32
				if sb != 0 {
					qs = 1 / math.Float32frombits(sb)
				}
				for t := range col {
					col[t] = m[(gi*32+int64(t))*q.n+j] * qs
				}
				out := d[(j*g+gi)*16:][:16]
				for t := range out {
					out[t] = e2m1FromF32(col[2*t]) | e2m1FromF32(col[2*t+1])<<4
				}
			}
		}
	}
}

// e2m1FromF32 is downcast_to_mxfp_torch's float32-bits-to-E2M1 step.
func e2m1FromF32(f float32) byte {
	b := math.Float32bits(f)
	sign := b & 0x80000000
	exp := b >> 23 & 0xff
	mant := b & 0x7fffff
	const e8Bias, e2Bias = 127, 1
	if exp < e8Bias {
		mant = (0x400000 | mant>>1) >> (e8Bias - exp - 1)
	}
	exp = max(exp, e8Bias-e2Bias) - (e8Bias - e2Bias)
	v := ((exp<<2 | mant>>21) + 1) >> 1
	v = min(v, 7)
	return byte(sign>>28 | v)
}
