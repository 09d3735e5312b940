//go:build !amd64 || purego

package lora

const vecCols = 64

// haveVec and have512 are false: there are no vector kernels (variables
// so that the tests that switch them off build everywhere).
var haveVec, have512 = false, false

func addRowVec(c, l, rm *float32, n, r, cols int, s float32) { panic("lora: no vector kernel") }

func mergeBF16x4AVX512(dst, src *byte, stride int, l *float32, r int, rm *float32, n, cols int, s float32) {
	panic("lora: no vector kernel")
}
