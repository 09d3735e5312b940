package ggml

import "math"

// F16ToF32 converts an IEEE half-precision value to float32 exactly as
// ggml's GGML_FP16_TO_FP32 does (exact for every finite value and
// infinity; a NaN comes back quiet, as the hardware's multiply makes it).
func F16ToF32(h uint16) float32 {
	twoW := uint32(h) << 17
	sign := uint32(h&0x8000) << 16
	if twoW < 1<<27 {
		// Subnormal or zero: the magic-bias subtraction is exact.
		return math.Float32frombits(sign | math.Float32bits(math.Float32frombits(twoW>>17|126<<23)-0.5))
	}
	return math.Float32frombits(sign | math.Float32bits(math.Float32frombits(twoW>>4+0xE0<<23)*0x1p-112))
}

// F32ToF16 converts a float32 to IEEE half precision exactly as ggml's
// GGML_FP32_TO_FP16 does: round to nearest even, overflow to infinity,
// subnormal results kept, and every NaN to 0x7E00 with the input's sign.
func F32ToF16(f float32) uint16 {
	w := math.Float32bits(f)
	shl1 := w + w
	sign := w & 0x80000000
	abs := math.Float32frombits(w &^ 0x80000000)
	// Two separate roundings, as in ggml (the explicit conversions keep
	// the compiler from fusing or reassociating them).
	base := float32(float32(abs*0x1p112) * 0x1p-110)
	bias := shl1 & 0xFF000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = float32(math.Float32frombits((bias>>1)+0x07800000) + base)
	bits := math.Float32bits(base)
	nonsign := (bits>>13)&0x7C00 + bits&0x0FFF
	if shl1 > 0xFF000000 {
		nonsign = 0x7E00
	}
	return uint16(sign>>16 | nonsign)
}

// BF16ToF32 converts a bfloat16 value to float32 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts a float32 to bfloat16 exactly as ggml's
// GGML_FP32_TO_BF16 does: round to nearest even, subnormals kept, and a
// NaN truncated with its quiet bit forced on.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}

// e8m0Half returns 2^(e-128), ggml's GGML_E8M0_TO_FP32_HALF (MXFP4 scale).
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// le16 reads a little-endian uint16.
func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

// half reads a little-endian fp16 as float32.
func half(b []byte) float32 { return F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
