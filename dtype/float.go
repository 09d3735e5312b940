package dtype

import (
	"encoding/binary"
	"math"
	"sync"
)

// This file is the one home of the element codecs for the floating
// dtypes: half and bfloat16 both ways, float8 to float64, and the slice
// codecs that convert's cast and verify's comparison use. ggml's quantizers
// use the same half conversions; the two bfloat16 roundings differ only in
// what a NaN becomes (F32ToBF16 is c10's, F32ToBF16Quiet ggml's).

// F16ToF32 decodes an IEEE half-precision value to float32: exact for
// every finite value and infinity; a NaN keeps its sign and payload, quiet
// (as c10's fp16_ieee_to_fp32_value and ggml's GGML_FP16_TO_FP32 give it).
func F16ToF32(h uint16) float32 {
	twoW := uint32(h) << 17
	sign := uint32(h&0x8000) << 16
	if twoW < 1<<27 {
		// Subnormal or zero: the magic-bias subtraction is exact.
		return math.Float32frombits(sign | math.Float32bits(math.Float32frombits(twoW>>17|126<<23)-0.5))
	}
	return math.Float32frombits(sign | math.Float32bits(math.Float32frombits(twoW>>4+0xE0<<23)*0x1p-112))
}

// F32ToF16 rounds f to IEEE half precision, to nearest even, with
// subnormal results kept, overflow to infinity, and every NaN to 0x7E00
// with the input's sign. c10's rounding and ggml's GGML_FP32_TO_FP16 give
// the same bits for all 2^32 inputs; this is ggml's formulation.
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

// f32ToF16Fast is F32ToF16 with the common case, a result in half's
// normal range (or rounding up to Inf), done without branches; the rest
// goes to F32ToF16.
func f32ToF16Fast(f float32) uint16 {
	u := math.Float32bits(f)
	abs := u & 0x7fffffff
	if abs-0x38800000 >= 0x47800000-0x38800000 { // outside [2^-14, 2^16)
		return F32ToF16(f)
	}
	// Rebias the exponent (127 -> 15), round the 13 dropped mantissa
	// bits to nearest even; a carry into the exponent is right, up to
	// Inf at 65520.
	v := abs - (127-15)<<23
	return uint16(u>>16)&0x8000 | uint16((v+0xfff+(v>>13)&1)>>13)
}

// BF16ToF32 decodes a bfloat16 value to float32 (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds f to bfloat16, to nearest even, subnormals kept; every
// NaN becomes the canonical 0x7fc0, as c10 (and so torch's .to(bfloat16))
// makes it.
func F32ToBF16(f float32) uint16 {
	if f != f {
		return 0x7fc0
	}
	u := math.Float32bits(f)
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// F32ToBF16Quiet is F32ToBF16 except for NaN, which is truncated with its
// quiet bit forced on, as ggml's GGML_FP32_TO_BF16 makes it.
func F32ToBF16Quiet(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + (0x7fff + (u>>16)&1)) >> 16)
}

// Float8ToFloat64 decodes one byte of a float8 dtype as torch defines them:
// e4m3fn (bias 7, no infinities, NaN = S.1111.111), e5m2 (IEEE-like, bias
// 15), the fnuz variants (bias 8 and 16, no infinities, NaN = 0x80, no
// negative zero) and e8m0fnu (an unsigned power of two, 0xFF = NaN). It
// returns NaN for any other d.
func Float8ToFloat64(d DType, b byte) float64 {
	var expBits, manBits, bias int
	switch d {
	case Float8E8M0FNU:
		if b == 0xff {
			return math.NaN()
		}
		return math.Ldexp(1, int(b)-127)
	case Float8E4M3FN:
		expBits, manBits, bias = 4, 3, 7
		if b&0x7f == 0x7f {
			return math.NaN()
		}
	case Float8E5M2:
		expBits, manBits, bias = 5, 2, 15
		if b&0x7c == 0x7c {
			if b&0x03 != 0 {
				return math.NaN()
			}
			if b&0x80 != 0 {
				return math.Inf(-1)
			}
			return math.Inf(1)
		}
	case Float8E4M3FNUZ:
		expBits, manBits, bias = 4, 3, 8
		if b == 0x80 {
			return math.NaN()
		}
	case Float8E5M2FNUZ:
		expBits, manBits, bias = 5, 2, 16
		if b == 0x80 {
			return math.NaN()
		}
	default:
		return math.NaN()
	}
	sign := 1.0
	if b&0x80 != 0 {
		sign = -1
	}
	exp := int(b>>manBits) & (1<<expBits - 1)
	man := float64(int(b) & (1<<manBits - 1))
	scale := float64(int(1) << manBits)
	if exp == 0 {
		return sign * math.Ldexp(man/scale, 1-bias)
	}
	return sign * math.Ldexp(1+man/scale, exp-bias)
}

// ToFloat32 decodes one little-endian element of a floating dtype the way
// torch converts it before narrowing: float64 is rounded to float32 first
// (c10 converts double to Half and BFloat16 through float), the others
// are exact.
func ToFloat32(d DType, b []byte) float32 {
	switch d {
	case Float64:
		return float32(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case Float32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case Float16:
		return F16ToF32(binary.LittleEndian.Uint16(b))
	case BFloat16:
		return BF16ToF32(binary.LittleEndian.Uint16(b))
	}
	return float32(Float8ToFloat64(d, b[0]))
}

// PutFloat32 encodes f as one little-endian element of float64, float32,
// float16 or bfloat16 (c10's roundings); other dtypes are left untouched.
func PutFloat32(d DType, b []byte, f float32) {
	switch d {
	case Float64:
		binary.LittleEndian.PutUint64(b, math.Float64bits(float64(f)))
	case Float32:
		binary.LittleEndian.PutUint32(b, math.Float32bits(f))
	case Float16:
		binary.LittleEndian.PutUint16(b, F32ToF16(f))
	case BFloat16:
		binary.LittleEndian.PutUint16(b, F32ToBF16(f))
	}
}

// DecodeFloat32 decodes len(dst) little-endian elements of the floating
// dtype d from src (ToFloat32 per element): one loop per dtype, so that
// the dtype is not looked at per element, bfloat16 sixteen at a time by
// the vector kernel of CastBytes where the CPU has one.
func DecodeFloat32(d DType, dst []float32, src []byte) {
	le := binary.LittleEndian
	switch d {
	case Float32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case BFloat16:
		v := vecDecodeBF16(dst, src)
		for i := v; i < len(dst); i++ {
			dst[i] = math.Float32frombits(uint32(le.Uint16(src[2*i:])) << 16)
		}
	case Float64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		}
	case Float16:
		table := halfTable()
		for i := range dst {
			dst[i] = table[le.Uint16(src[2*i:])]
		}
	default:
		n := d.Size()
		for i := range dst {
			dst[i] = ToFloat32(d, src[n*i:])
		}
	}
}

// halfTable maps every float16 bit pattern to its float32 value.
var halfTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = F16ToF32(uint16(h))
	}
	return &t
})

// EncodeFloat32 encodes src as little-endian elements of d (float64,
// float32, float16 or bfloat16, PutFloat32 per element) into dst,
// bfloat16 and float16 sixteen at a time by the vector kernels of
// CastBytes where the CPU has them (the same bits).
func EncodeFloat32(d DType, dst []byte, src []float32) {
	le := binary.LittleEndian
	switch d {
	case BFloat16:
		for i := vecEncodeBF16(dst, src); i < len(src); i++ {
			le.PutUint16(dst[2*i:], F32ToBF16(src[i]))
		}
	case Float16:
		for i := vecEncodeF16(dst, src); i < len(src); i++ {
			le.PutUint16(dst[2*i:], f32ToF16Fast(src[i]))
		}
	case Float32:
		for i, f := range src {
			le.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	default:
		n := d.Size()
		for i, f := range src {
			PutFloat32(d, dst[n*i:], f)
		}
	}
}

// Float64Decoder returns a function that decodes one little-endian
// element of d to float64, or nil when d has no real value per element
// (complex, quantized, packed and bit types).
func Float64Decoder(d DType) func([]byte) float64 {
	le := binary.LittleEndian
	switch d {
	case Float64:
		return func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) }
	case Float32:
		return func(b []byte) float64 { return float64(math.Float32frombits(le.Uint32(b))) }
	case Float16:
		return func(b []byte) float64 { return float64(F16ToF32(le.Uint16(b))) }
	case BFloat16:
		return func(b []byte) float64 { return float64(BF16ToF32(le.Uint16(b))) }
	case Int64:
		return func(b []byte) float64 { return float64(int64(le.Uint64(b))) }
	case Int32:
		return func(b []byte) float64 { return float64(int32(le.Uint32(b))) }
	case Int16:
		return func(b []byte) float64 { return float64(int16(le.Uint16(b))) }
	case Int8:
		return func(b []byte) float64 { return float64(int8(b[0])) }
	case Uint8, Bool:
		return func(b []byte) float64 { return float64(b[0]) }
	case Uint16:
		return func(b []byte) float64 { return float64(le.Uint16(b)) }
	case Uint32:
		return func(b []byte) float64 { return float64(le.Uint32(b)) }
	case Uint64:
		return func(b []byte) float64 { return float64(le.Uint64(b)) }
	case Float8E4M3FN, Float8E5M2, Float8E4M3FNUZ, Float8E5M2FNUZ, Float8E8M0FNU:
		return func(b []byte) float64 { return Float8ToFloat64(d, b[0]) }
	}
	return nil
}
