package verify

import (
	"context"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// fp8LikePairs returns n bfloat16 pairs (as read: 2 bytes an element) of
// the kind bench/diff_fp8.sh compares: A normal with sigma 0.02, B A
// with a relative error up to 2^-4 (an e4m3 code's), rounded to bfloat16.
func fp8LikePairs(seed int64, n int) (ca, cb []byte) {
	rng := rand.New(rand.NewSource(seed))
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(0.02 * rng.NormFloat64())
		y[i] = x[i] * float32(1+(rng.Float64()-0.5)/8)
	}
	ca, cb = make([]byte, 2*n), make([]byte, 2*n)
	dtype.EncodeFloat32(dtype.BFloat16, ca, x)
	dtype.EncodeFloat32(dtype.BFloat16, cb, y)
	return ca, cb
}

// BenchmarkAddBF16: the statistics of 2^16 bfloat16 pairs (a chunk as
// diff reads it) as bench/diff_fp8.sh's, read as they are.
func BenchmarkAddBF16(b *testing.B) { benchAddBF16(b, 0) }

// BenchmarkAddBF16RelInf: BenchmarkAddBF16 after a pair of a B zero
// against a nonzero A (max |A-B|/|B| +Inf: statsBF16BF16BlockInf), the
// case of every tensor of bench/diff_fp8.sh's 4 GB pair.
func BenchmarkAddBF16RelInf(b *testing.B) { benchAddBF16(b, math.Inf(1)) }

// benchAddBF16 is BenchmarkAddBF16 from a maximum relative error of
// maxRel.
func benchAddBF16(b *testing.B, maxRel float64) {
	const n = 1 << 16
	ca, cb := fp8LikePairs(1, n)
	bufA, bufB := make([]float32, n), make([]float32, n)
	var k f32Kernel
	b.SetBytes(4 * n)
	u0 := userNS()
	s := acc{maxRel: maxRel}
	for range b.N {
		s.addRaw(dtype.BFloat16, dtype.BFloat16, ca, cb, n, tolerance{}, &k, bufA, bufB)
	}
	s.flush(&k)
	b.ReportMetric(float64(userNS()-u0)/float64(b.N)/n, "user-ns/elem")
}

// BenchmarkAddBF16F64: BenchmarkAddBF16 with the float64 kernels only.
func BenchmarkAddBF16F64(b *testing.B) {
	defer func(v bool) { useBlock = v }(useBlock)
	useBlock = false
	BenchmarkAddBF16(b)
}

// BenchmarkDiffBF16: a whole Diff of two in-memory checkpoints of 8
// bfloat16 tensors of 2^22 elements (64 MiB a side) as bench/diff_fp8.sh
// compares; CPU-ns an element (user+sys).
func BenchmarkDiffBF16(b *testing.B) {
	var ta, tb [][]byte
	for i := range 8 {
		ca, cb := fp8LikePairs(int64(i), 1<<22)
		ta, tb = append(ta, ca), append(tb, cb)
	}
	a, c := memSTRaw(b, "BF16", 2, ta), memSTRaw(b, "BF16", 2, tb)
	b.SetBytes(2 * 8 << 23)
	b.ResetTimer()
	u0 := cpuNS()
	for range b.N {
		if _, err := Diff(context.Background(), a, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuNS()-u0)/float64(b.N)/(8<<22), "cpu-ns/elem")
}

// BenchmarkDiffBF16F64: BenchmarkDiffBF16 with the float64 kernels only.
func BenchmarkDiffBF16F64(b *testing.B) {
	defer func(v bool) { useBlock = v }(useBlock)
	useBlock = false
	BenchmarkDiffBF16(b)
}
