//go:build !amd64 || purego

package quant

const haveFP8Vec = false

func fp8BF16AVX2(dst, src []byte, s float32, k *fp8Consts) { panic("no vector kernel") }
func fp8F32AVX2(dst, src []byte, s float32, k *fp8Consts)  { panic("no vector kernel") }

func mxfp4T16AVX2(dst *byte, rowStride int, src *byte, srcStride int, adj *[16]uint16, k *mxfp4VecConsts) {
	panic("no vector kernel")
}
