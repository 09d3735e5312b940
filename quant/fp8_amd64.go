//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

var haveFP8Vec = cpu.X86.HasAVX2

// fp8BF16AVX2 is fp8VecGo to bfloat16 for len(src) codes (a multiple of
// 16), dst 2*len(src) bytes.
//
//go:noescape
func fp8BF16AVX2(dst, src []byte, s float32, k *fp8Consts)

// fp8F32AVX2 is fp8VecGo to float32 for len(src) codes (a multiple of
// 16), dst 4*len(src) bytes.
//
//go:noescape
func fp8F32AVX2(dst, src []byte, s float32, k *fp8Consts)
