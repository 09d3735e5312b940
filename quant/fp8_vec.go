package quant

import (
	"encoding/binary"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// The vector decode of block FP8 (grid_encode.go uses it for bfloat16
// and float32 output of float32 products): a code's value is made with
// integer operations instead of a table, so eight codes go through one
// AVX2 register (fp8_amd64.s); fp8VecGo is the same arithmetic one
// element at a time, the portable path and the vector kernel's tail.
//
// The bit trick: the 7 magnitude bits of an e4m3fn code, shifted left by
// 20, have the code's exponent in the low bits of a float32's exponent
// field and its mantissa at the top of the float32's; adding 127-7 to
// that exponent field (an integer add) gives the code's value exactly
// for every normal code. A subnormal code (exponent 0) is given the
// exponent 1 (2^(1-7) + m*2^(1-7-3)), and subtracting 2^(1-7) leaves its
// value m*2^-9 exactly (or +0). No step meets a float32 subnormal (an operand the
// hardware multiplies through a slow assist). e5m2 likewise: shift 21,
// 127-15, 2^(1-15). The codes with no finite value are fixed up afterwards:
// e4m3fn's S.1111.111 is NaN, e5m2's S.11111.00 is +-Inf and S.11111.xx
// NaN, the NaN being float32(math.NaN()) as the table path's
// (dtype.Float8ToFloat64). Then the product with the block's scale in
// float32, code first (a NaN code's bits win over a NaN scale's, as in
// the table path), and for bfloat16 round-to-nearest-even with every NaN
// 0x7fc0, as dtype.F32ToBF16.

// fp8Consts are one float8 format's constants, each repeated in 8 lanes
// for the vector kernel.
type fp8Consts struct {
	mag    [8]uint32 // 0x7f: the magnitude bits
	sign   [8]uint32 // 0x80
	expAdd [8]uint32 // (127-bias) << 23
	inf    [8]uint32 // the magnitude that is Inf (0x100: none)
	nanMin [8]uint32 // the least NaN magnitude, minus 1
	infF   [8]uint32 // 0x7f800000
	nanF   [8]uint32 // float32(math.NaN())
	one    [8]uint32 // 1, 0x7fff, 0x7fc0: bfloat16 rounding
	r7fff  [8]uint32
	bfNaN  [8]uint32
	subC   [8]uint32 // float32 bits of 2^(1-bias)
	subMax [8]uint32 // the greatest subnormal magnitude
	shift  uint64    // 20 or 21
	_      [24]byte
	exp1   [8]uint32 // 1 << 23
	f16NaN [8]uint32 // 0xffc00000: a NaN's sign and quiet bit, what float16 keeps
	t512   *fp8Tab512
}

func newFP8Consts(shift uint64, bias, mbits int, inf, nanMin uint32, d dtype.DType) *fp8Consts {
	c := &fp8Consts{shift: shift, t512: newFP8Tab512(f8Tables[d])}
	for i := 0; i < 8; i++ {
		c.mag[i], c.sign[i] = 0x7f, 0x80
		c.expAdd[i] = uint32(127-bias) << 23
		c.subC[i] = math.Float32bits(float32(math.Ldexp(1, 1-bias)))
		c.subMax[i] = 1<<mbits - 1
		c.exp1[i] = 1 << 23
		c.inf[i], c.nanMin[i] = inf, nanMin-1
		c.infF[i], c.nanF[i] = 0x7f800000, math.Float32bits(float32(math.NaN()))
		c.one[i], c.r7fff[i], c.bfNaN[i] = 1, 0x7fff, 0x7fc0
		c.f16NaN[i] = 0xffc00000
	}
	return c
}

var (
	fp8E4M3Consts = newFP8Consts(20, 7, 3, 0x100, 0x7f, dtype.Float8E4M3FN)
	fp8E5M2Consts = newFP8Consts(21, 15, 2, 0x7c, 0x7d, dtype.Float8E5M2)
)

// fp8VecConsts returns the constants of d, nil for a float8 format the
// vector decode does not take.
func fp8VecConsts(d dtype.DType) *fp8Consts {
	switch d {
	case dtype.Float8E4M3FN:
		return fp8E4M3Consts
	case dtype.Float8E5M2:
		return fp8E5M2Consts
	}
	return nil
}

// fp8Value is code b's float32 value by the bit trick.
func (k *fp8Consts) value(b byte) float32 {
	mag := uint32(b) & 0x7f
	sign := uint32(b&0x80) << 24
	bits := mag<<k.shift + k.expAdd[0]
	if mag <= k.subMax[0] {
		bits += k.exp1[0]
	}
	v := math.Float32frombits(bits)
	if mag <= k.subMax[0] {
		v -= math.Float32frombits(k.subC[0])
	}
	v = math.Float32frombits(math.Float32bits(v) | sign)
	switch {
	case mag > k.nanMin[0]:
		v = math.Float32frombits(k.nanF[0])
	case mag == k.inf[0]:
		v = math.Float32frombits(sign | 0x7f800000)
	}
	return v
}

// fp8Out is the output dtype of the vector decode.
type fp8Out int

const (
	fp8ToBF16 fp8Out = iota
	fp8ToF32
	fp8ToF16
)

// size is the bytes of one output element.
func (o fp8Out) size() int {
	if o == fp8ToF32 {
		return 4
	}
	return 2
}

// fp8OutOf is the vector decode's output for dt; false for a dtype it
// does not write.
func fp8OutOf(dt dtype.DType) (fp8Out, bool) {
	switch dt {
	case dtype.BFloat16:
		return fp8ToBF16, true
	case dtype.Float32:
		return fp8ToF32, true
	case dtype.Float16:
		return fp8ToF16, true
	}
	return 0, false
}

// fp8VecGo writes the products of codes q with scale s into out, in o's
// dtype, one element at a time: float32 products rounded by
// dtype.F32ToBF16 or dtype.F32ToF16 (nearest even, overflow to Inf,
// float16 subnormals, NaN 0x7fc0 or sign|0x7e00).
func fp8VecGo(k *fp8Consts, o fp8Out, out, q []byte, s float32) {
	le := binary.LittleEndian
	switch o {
	case fp8ToBF16:
		for j, b := range q {
			le.PutUint16(out[2*j:], dtype.F32ToBF16(k.value(b)*s))
		}
	case fp8ToF16:
		for j, b := range q {
			le.PutUint16(out[2*j:], dtype.F32ToF16(k.value(b)*s))
		}
	default:
		for j, b := range q {
			le.PutUint32(out[4*j:], math.Float32bits(k.value(b)*s))
		}
	}
}

// fp8Vec is fp8VecGo, the AVX2 kernel doing what it can.
func fp8Vec(k *fp8Consts, o fp8Out, out, q []byte, s float32) {
	n := 0
	if haveFP8Vec && len(q) >= 16 && (o != fp8ToF16 || haveF16C) {
		n = len(q) &^ 15
		switch o {
		case fp8ToBF16:
			fp8BF16AVX2(out[:2*n], q[:n], s, k)
		case fp8ToF16:
			fp8F16AVX2(out[:2*n], q[:n], s, k)
		default:
			fp8F32AVX2(out[:4*n], q[:n], s, k)
		}
	}
	fp8VecGo(k, o, out[o.size()*n:], q[n:], s)
}
