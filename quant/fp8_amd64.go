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

// mxfp4T16AVX2 is mxfp4T16Go: 32 output rows (rowStride bytes apart) of
// 16 bfloat16 each, from 16 stored rows' 16-byte groups (srcStride apart).
//
//go:noescape
func mxfp4T16AVX2(dst *byte, rowStride int, src *byte, srcStride int, adj *[16]uint16, k *mxfp4VecConsts)
