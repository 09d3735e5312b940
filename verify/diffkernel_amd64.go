//go:build amd64 && !purego

package verify

import "golang.org/x/sys/cpu"

// useVec turns the AVX2 kernels on (a variable: the tests compare them
// with the Go ones).
var useVec = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// statsF32AVX2 is addF32Go for finite pairs in blocks of four, from
// element 0 of x and y (n of them, a multiple of 4): it returns the index
// of the first block it leaves (a NaN or infinity in it, or an element
// whose |d| exceeds relThr*|b|), n when none. It adds nothing of that
// block.
//
//go:noescape
func statsF32AVX2(x, y *float32, n int, k *f32Kernel) int

// sumSqF32AVX2 sums the squares of the finite elements among n (a
// multiple of 8) of x into out's lanes, and counts them into cnt's.
//
//go:noescape
func sumSqF32AVX2(x *float32, n int, out *[kernelLanes]float64, cnt *[kernelLanes]int64)

// vecF32 runs the vector kernel over x and y, returning how many elements
// it did (0 without AVX2).
func vecF32(x, y []float32, k *f32Kernel) int {
	n := len(x) &^ (kernelLanes - 1)
	if !useVec || n == 0 {
		return 0
	}
	return statsF32AVX2(&x[0], &y[0], n, k)
}

// sumSqVec sums the squares of the finite elements of a prefix of x,
// returning the sum, their count and the prefix's length.
func sumSqVec(x []float32) (float64, int64, int) {
	n := len(x) &^ 7
	if !useVec || n == 0 {
		return 0, 0, 0
	}
	var sum [kernelLanes]float64
	var cnt [kernelLanes]int64
	sumSqF32AVX2(&x[0], n, &sum, &cnt)
	return laneSum(&sum), cnt[0] + cnt[1] + cnt[2] + cnt[3], n
}
