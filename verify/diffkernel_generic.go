//go:build !amd64 || purego

package verify

import (
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
)

// useVec: no vector kernels on this platform.
var useVec = false

// useAVX512: none either.
var useAVX512 = false

func vecKernel(da, db dtype.DType) statsKernel { return nil }

func sumSqVec(d dtype.DType, x []byte) (float64, int64, int) { return 0, 0, 0 }

// useBlock: no block kernel either.
var useBlock = false

func blockKernel(da, db dtype.DType, tol tolerance) statsKernel { return nil }

// statsBF16BF16Block: no block kernel here (blockKernel returns nil; the
// tests that call it skip without AVX-512).
func statsBF16BF16Block(x, y unsafe.Pointer, n int, k *f32Kernel) int { return 0 }

// statsBF16BF16BlockInf and useBlockInf: none here either.
func statsBF16BF16BlockInf(x, y unsafe.Pointer, n int, k *f32Kernel) int { return 0 }

var useBlockInf = false
