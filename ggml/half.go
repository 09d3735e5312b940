package ggml

import (
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

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
func half(b []byte) float32 { return dtype.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
