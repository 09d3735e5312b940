package lora

import (
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
)

// decodeTile decodes src, len(c) elements of d, into c: dtype's
// DecodeFloat32, bfloat16 sixteen at a time with the vector code where
// the CPU has it.
func decodeTile(d dtype.DType, c []float32, src []byte) {
	if d == dtype.BFloat16 && haveVec && len(c) >= 16 {
		nv := len(c) &^ 15
		_ = src[2*nv-1]
		decodeBF16Vec(&c[0], (*uint16)(unsafe.Pointer(&src[0])), nv)
		c, src = c[nv:], src[2*nv:]
	}
	dtype.DecodeFloat32(d, c, src)
}

// encodeTile encodes c into dst as d: dtype's EncodeFloat32 (bfloat16
// rounded to nearest even, NaN as 0x7fc0), bfloat16 sixteen at a time
// with the vector code where the CPU has it.
func encodeTile(d dtype.DType, dst []byte, c []float32) {
	if d == dtype.BFloat16 && haveVec && len(c) >= 16 {
		nv := len(c) &^ 15
		_ = dst[2*nv-1]
		encodeBF16Vec((*uint16)(unsafe.Pointer(&dst[0])), &c[0], nv)
		c, dst = c[nv:], dst[2*nv:]
	}
	dtype.EncodeFloat32(d, dst, c)
}
