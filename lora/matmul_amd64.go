//go:build amd64 && !purego

package lora

import "golang.org/x/sys/cpu"

// vecCols is the number of columns the vector kernel does at once (eight
// AVX2 registers of eight float32s).
const vecCols = 64

// haveVec turns the AVX2 kernel on (tests turn it off to run the portable
// code); have512 the AVX-512 one of mergeRows (rows_amd64.s).
var (
	haveVec = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	have512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
)

// addRowAVX2 is addRowGo for cols (a multiple of 64) columns from c, rm
// pointing at the first: r products of a broadcast l[k] and rm's row k
// (stride n floats) summed into eight accumulators with fused
// multiply-adds, then c += s * d rounded twice, as the Go code does.
//
//go:noescape
func addRowAVX2(c, l, rm *float32, n, r, cols int, s float32)

func addRowVec(c, l, rm *float32, n, r, cols int, s float32) { addRowAVX2(c, l, rm, n, r, cols, s) }

// mergeBF16x4AVX512 merges four rows of a bfloat16 weight (src, stride
// bytes apart) with one adapter into dst (the same layout), cols (a
// multiple of 64) columns from the first: l points at the first row's
// row of l (r floats a row), rm at rm's column (n floats a row). The
// bits are those of decode, addTileGo and encode.
//
//go:noescape
func mergeBF16x4AVX512(dst, src *byte, stride int, l *float32, r int, rm *float32, n, cols int, s float32)
