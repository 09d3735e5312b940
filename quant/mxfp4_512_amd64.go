//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

// haveMXFP4Vec512 picks the AVX-512 MXFP4 kernel; tests turn it off to
// hold every path to the same bits.
var haveMXFP4Vec512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI

// mxfp4T32AVX512 is mxfp4T32Go (mxfp4_512.go) on AVX-512 (F, BW,
// VBMI): ntiles tiles of 32 stored rows, stopping before a tile with a
// scale outside t's range; it returns the tiles written.
//
//go:noescape
func mxfp4T32AVX512(dst *byte, rowStride int, src *byte, srcStride int, scales *byte, scaleStride, ngroups, ntiles int, t *mxfp4Tab512) int
