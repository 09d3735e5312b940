//go:build amd64 && !purego

package lora

import "golang.org/x/sys/cpu"

// vecCols is the number of columns the vector kernel does at once (eight
// AVX2 registers of eight float32s).
const vecCols = 64

var haveVec = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// addRowAVX2 is addRowGo for cols (a multiple of 64) columns from c, rm
// pointing at the first: r products of a broadcast l[k] and rm's row k
// (stride n floats) summed into eight accumulators with fused
// multiply-adds, then c += s * d rounded twice, as the Go code does.
//
//go:noescape
func addRowAVX2(c, l, rm *float32, n, r, cols int, s float32)

func addRowVec(c, l, rm *float32, n, r, cols int, s float32) { addRowAVX2(c, l, rm, n, r, cols, s) }
