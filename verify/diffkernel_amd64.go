//go:build amd64 && !purego

package verify

import (
	"math"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
	"golang.org/x/sys/cpu"
)

// useVec turns the vector kernels on (a variable: the tests compare them
// with the Go ones).
var useVec = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// The AVX2 statistics kernels, one per pair of element types: addF32Go
// for finite pairs in blocks of four, from element 0 of x and y (n of
// them, a multiple of 4). Each returns the index of the first block it
// leaves (a NaN or infinity in it, or an element whose |d| exceeds
// relThr*|b|), n when none, having added nothing of that block.

//go:noescape
func statsF32F32(x, y unsafe.Pointer, n int, k *f32Kernel) int

//go:noescape
func statsF32BF16(x, y unsafe.Pointer, n int, k *f32Kernel) int

//go:noescape
func statsBF16F32(x, y unsafe.Pointer, n int, k *f32Kernel) int

//go:noescape
func statsBF16BF16(x, y unsafe.Pointer, n int, k *f32Kernel) int

// sumSqF32 and sumSqBF16 sum the squares of the finite elements among n
// (a multiple of 8) of x into out's lanes, and count them into cnt's.
//
//go:noescape
func sumSqF32(x unsafe.Pointer, n int, out *[4]float64, cnt *[4]int64)

//go:noescape
func sumSqBF16(x unsafe.Pointer, n int, out *[4]float64, cnt *[4]int64)

// vecKernel returns the vector kernel for elements of da against db
// (float32 or bfloat16 each): AVX-512 where the CPU has it (and
// useAVX512), else AVX2; nil for other dtypes or without AVX2.
func vecKernel(da, db dtype.DType) statsKernel {
	if !useVec || !littleEndian {
		return nil
	}
	i := 0
	switch {
	case da == dtype.Float32 && db == dtype.Float32:
	case da == dtype.Float32 && db == dtype.BFloat16:
		i = 1
	case da == dtype.BFloat16 && db == dtype.Float32:
		i = 2
	case da == dtype.BFloat16 && db == dtype.BFloat16:
		i = 3
	default:
		return nil
	}
	if useAVX512 {
		return [...]statsKernel{statsF32F32AVX512, statsF32BF16AVX512, statsBF16F32AVX512, statsBF16BF16AVX512}[i]
	}
	return [...]statsKernel{statsF32F32, statsF32BF16, statsBF16F32, statsBF16BF16}[i]
}

// sumSqVec sums the squares of the finite elements of a prefix of x
// (elements of d), returning the sum, their count and the prefix's
// length in elements (0 without a vector kernel for d).
func sumSqVec(d dtype.DType, x []byte) (float64, int64, int) {
	if !useVec || !littleEndian || (d != dtype.Float32 && d != dtype.BFloat16) {
		return 0, 0, 0
	}
	block := 8
	if useAVX512 {
		block = 16
	}
	n := len(x) / d.Size() &^ (block - 1)
	if n == 0 {
		return 0, 0, 0
	}
	var sum [kernelLanes]float64
	var cnt [kernelLanes]int64
	p := unsafe.Pointer(&x[0])
	switch {
	case useAVX512 && d == dtype.Float32:
		sumSqF32AVX512(p, n, &sum, &cnt)
	case useAVX512:
		sumSqBF16AVX512(p, n, &sum, &cnt)
	case d == dtype.Float32:
		sumSqF32(p, n, (*[4]float64)(sum[:4]), (*[4]int64)(cnt[:4]))
	default:
		sumSqBF16(p, n, (*[4]float64)(sum[:4]), (*[4]int64)(cnt[:4]))
	}
	var c int64
	for _, v := range cnt {
		c += v
	}
	return laneSum(&sum), c, n
}

// useAVX512 turns the AVX-512 kernels on (with useVec; a variable: the
// tests compare them with the AVX2 and Go ones).
var useAVX512 = useVec && cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

// The AVX-512 statistics kernels: as the AVX2 ones, in blocks of eight
// (n a multiple of 8).

//go:noescape
func statsF32F32AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int

//go:noescape
func statsF32BF16AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int

//go:noescape
func statsBF16F32AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int

//go:noescape
func statsBF16BF16AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int

// sumSqF32AVX512 and sumSqBF16AVX512 are sumSqF32 and sumSqBF16 for n a
// multiple of 16.
//
//go:noescape
func sumSqF32AVX512(x unsafe.Pointer, n int, out *[kernelLanes]float64, cnt *[kernelLanes]int64)

//go:noescape
func sumSqBF16AVX512(x unsafe.Pointer, n int, out *[kernelLanes]float64, cnt *[kernelLanes]int64)

// statsBF16BF16Block is the block kernel (diffkernel32.go) for bfloat16
// against bfloat16: addF32Go for n pairs (a multiple of blockPairs) in
// steps of blockPairs, returning the index of the first step it leaves
// (n when none), having added nothing of it.
//
//go:noescape
func statsBF16BF16Block(x, y unsafe.Pointer, n int, k *f32Kernel) int

// statsBF16BF16BlockInf is statsBF16BF16Block without the test for a new
// maximum relative error: for k.maxRel +Inf, which no pair can exceed
// (a B of zero against a nonzero A, common in a quantized B, makes it
// so). It leaves only the steps outside the block kernel's range.
//
//go:noescape
func statsBF16BF16BlockInf(x, y unsafe.Pointer, n int, k *f32Kernel) int

// useBlockInf turns statsBF16BF16BlockInf on (a variable: the tests
// compare it with statsBF16BF16Block).
var useBlockInf = true

// blockStats is the block kernel: statsBF16BF16BlockInf where k's
// maximum relative error is +Inf, statsBF16BF16Block otherwise.
func blockStats(x, y unsafe.Pointer, n int, k *f32Kernel) int {
	if useBlockInf && math.IsInf(k.maxRel, 1) {
		return statsBF16BF16BlockInf(x, y, n, k)
	}
	return statsBF16BF16Block(x, y, n, k)
}

// useBlock turns the block kernel on (with useAVX512; a variable: the
// tests compare it with the float64 kernels).
var useBlock = useAVX512

// blockKernel returns the block kernel for elements of da against db:
// bfloat16 against bfloat16 without a tolerance (its counts compare
// with atol + rtol*|b| in float64) where useBlock; nil otherwise.
func blockKernel(da, db dtype.DType, tol tolerance) statsKernel {
	if !useBlock || !useAVX512 || !useVec || !littleEndian || tol.on || da != dtype.BFloat16 || db != dtype.BFloat16 {
		return nil
	}
	return blockStats
}
