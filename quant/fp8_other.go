//go:build !amd64 || purego

package quant

// Variables, not constants, so that the tests' path switches compile.
var (
	haveFP8Vec    = false
	haveF16C      = false
	haveFP8Vec512 = false
)

func fp8BF16AVX2(dst, src []byte, s float32, k *fp8Consts) { panic("no vector kernel") }
func fp8F16AVX2(dst, src []byte, s float32, k *fp8Consts)  { panic("no vector kernel") }
func fp8F32AVX2(dst, src []byte, s float32, k *fp8Consts)  { panic("no vector kernel") }

func fp8Kernel512(o fp8Out, out, q []byte, scales []float32, bw, off int, t *fp8Tab512) int {
	panic("no vector kernel")
}

func mxfp4T16AVX2(dst *byte, rowStride int, src *byte, srcStride int, adj *[16]uint16, k *mxfp4VecConsts) {
	panic("no vector kernel")
}

// haveFP8Tab512: no table kernel here (the table decode is not used).
var haveFP8Tab512 = false

func fp8TabBF16AVX512(dst, src *byte, n int, tabs *byte, bw, off int, perm *[64]byte) {
	panic("no vector kernel")
}

func fp8TabSplit(tab, prod *[512]byte) { panic("no vector kernel") }
