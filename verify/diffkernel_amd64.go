//go:build amd64 && !purego

package verify

import (
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
	"golang.org/x/sys/cpu"
)

// useVec turns the AVX2 kernels on (a variable: the tests compare them
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
func sumSqF32(x unsafe.Pointer, n int, out *[kernelLanes]float64, cnt *[kernelLanes]int64)

//go:noescape
func sumSqBF16(x unsafe.Pointer, n int, out *[kernelLanes]float64, cnt *[kernelLanes]int64)

// vecKernel returns the vector kernel for elements of da against db
// (float32 or bfloat16 each), nil for others or without AVX2.
func vecKernel(da, db dtype.DType) statsKernel {
	if !useVec || !littleEndian {
		return nil
	}
	switch {
	case da == dtype.Float32 && db == dtype.Float32:
		return statsF32F32
	case da == dtype.Float32 && db == dtype.BFloat16:
		return statsF32BF16
	case da == dtype.BFloat16 && db == dtype.Float32:
		return statsBF16F32
	case da == dtype.BFloat16 && db == dtype.BFloat16:
		return statsBF16BF16
	}
	return nil
}

// sumSqVec sums the squares of the finite elements of a prefix of x
// (elements of d), returning the sum, their count and the prefix's
// length in elements (0 without a vector kernel for d).
func sumSqVec(d dtype.DType, x []byte) (float64, int64, int) {
	if !useVec || !littleEndian || (d != dtype.Float32 && d != dtype.BFloat16) {
		return 0, 0, 0
	}
	n := len(x) / d.Size() &^ 7
	if n == 0 {
		return 0, 0, 0
	}
	var sum [kernelLanes]float64
	var cnt [kernelLanes]int64
	if d == dtype.Float32 {
		sumSqF32(unsafe.Pointer(&x[0]), n, &sum, &cnt)
	} else {
		sumSqBF16(unsafe.Pointer(&x[0]), n, &sum, &cnt)
	}
	return laneSum(&sum), cnt[0] + cnt[1] + cnt[2] + cnt[3], n
}
