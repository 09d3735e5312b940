//go:build !amd64 || purego

package quant

// haveMXFP4Vec512 is a variable so that the tests' path switches compile.
var haveMXFP4Vec512 = false

func mxfp4T32AVX512(dst *byte, rowStride int, src *byte, srcStride int, scales *byte, scaleStride, ngroups, ntiles int, t *mxfp4Tab512) int {
	panic("no vector kernel")
}
