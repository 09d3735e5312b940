package lora

import "github.com/ckpt-dev/ckpt/dtype"

// decodeTile decodes src, len(c) elements of d, into c: dtype's
// DecodeFloat32, bfloat16 with the vector code where the CPU has it.
func decodeTile(d dtype.DType, c []float32, src []byte) {
	dtype.DecodeFloat32(d, c, src)
}

// encodeTile encodes c into dst as d: dtype's EncodeFloat32 (bfloat16
// rounded to nearest even, NaN as 0x7fc0).
func encodeTile(d dtype.DType, dst []byte, c []float32) {
	dtype.EncodeFloat32(d, dst, c)
}
