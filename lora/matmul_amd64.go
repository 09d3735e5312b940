//go:build amd64 && !purego

package lora

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// vecCols is the number of columns the vector kernel does at once (eight
// AVX2 registers of eight float32s).
const vecCols = 64

// haveVec turns the AVX2 kernel on (tests turn it off to run the portable
// code); have512 the AVX-512 ones (addRowAVX512, and mergeRows' fused
// bfloat16 kernel in rows_amd64.s).
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

// addRowAVX512 is addRowAVX2 for cols a multiple of 128, 16 lanes a
// register.
//
//go:noescape
func addRowAVX512(c, l, rm *float32, n, r, cols int, s float32)

// addRowVec does cols (a multiple of 64) columns with the vector kernels:
// the whole groups of 128 with AVX-512 where the CPU has it, the rest with
// AVX2 (the same bits).
func addRowVec(c, l, rm *float32, n, r, cols int, s float32) {
	if w := cols &^ 127; have512 && w > 0 {
		addRowAVX512(c, l, rm, n, r, w, s)
		if w == cols {
			return
		}
		c = (*float32)(unsafe.Add(unsafe.Pointer(c), 4*w))
		rm = (*float32)(unsafe.Add(unsafe.Pointer(rm), 4*w))
		cols -= w
	}
	addRowAVX2(c, l, rm, n, r, cols, s)
}

// mergeBF16x4AVX512 merges four rows of a bfloat16 weight (src, stride
// bytes apart) with one adapter into dst (the same layout), cols (a
// multiple of 64) columns from the first: l points at the first row's
// row of l (r floats a row), rm at rm's column (n floats a row). The
// bits are those of decode, addTileGo and encode.
//
//go:noescape
func mergeBF16x4AVX512(dst, src *byte, stride int, l *float32, r int, rm *float32, n, cols int, s float32)
