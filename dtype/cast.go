package dtype

import (
	"encoding/binary"
	"math"
)

// Slice casts from one floating dtype to another straight from bytes to
// bytes, with no float32 slice between: float32 to bfloat16 and to
// float16, bfloat16 to float32. Each has a portable loop and, on amd64
// with AVX2 (and F16C for float16), a vector kernel (cast_amd64.s) that
// gives the same bits for every input, and float32 to bfloat16 one in
// AVX-512 too; the tests force each path and compare them.

// Caster casts len(src)/from.Size() little-endian elements of src into
// dst, which holds as many elements of the target dtype.
type Caster func(dst, src []byte)

// CastBytes returns the byte-to-byte cast from one dtype to another where
// a direct one exists (float32 to bfloat16 or float16, bfloat16 to
// float32), with the same roundings as EncodeFloat32 and DecodeFloat32:
// to nearest even, every NaN to bfloat16's 0x7fc0 or to half's 0x7e00
// with its sign. It returns nil for every other pair.
func CastBytes(from, to DType) Caster {
	switch {
	case from == Float32 && to == BFloat16:
		return castF32ToBF16
	case from == Float32 && to == Float16:
		return castF32ToF16
	case from == BFloat16 && to == Float32:
		return castBF16ToF32
	}
	return nil
}

// castF32ToBF16Go is the portable float32 to bfloat16 cast (F32ToBF16
// per element).
func castF32ToBF16Go(dst, src []byte) {
	n := len(src) / 4
	dst, src = dst[:2*n], src[:4*n]
	for i := range n {
		u := binary.LittleEndian.Uint32(src[4*i:])
		h := uint16((u + 0x7fff + (u>>16)&1) >> 16)
		if u&0x7fffffff > 0x7f800000 {
			h = 0x7fc0
		}
		binary.LittleEndian.PutUint16(dst[2*i:], h)
	}
}

// castF32ToF16Go is the portable float32 to float16 cast.
func castF32ToF16Go(dst, src []byte) {
	n := len(src) / 4
	dst, src = dst[:2*n], src[:4*n]
	for i := range n {
		f := math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		binary.LittleEndian.PutUint16(dst[2*i:], f32ToF16Fast(f))
	}
}

// castBF16ToF32Go is the portable bfloat16 to float32 cast.
func castBF16ToF32Go(dst, src []byte) {
	n := len(src) / 2
	dst, src = dst[:4*n], src[:2*n]
	for i := range n {
		binary.LittleEndian.PutUint32(dst[4*i:], uint32(binary.LittleEndian.Uint16(src[2*i:]))<<16)
	}
}
