package lora

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// forEachKernel calls run once per kernel the CPU has, each forced through
// the package switches: AVX-512 (with AVX2 beside it), AVX2 alone,
// portable Go; the switches are restored after.
func forEachKernel(run func(name string)) {
	v, w := haveVec, have512
	defer func() { haveVec, have512 = v, w }()
	for _, p := range []struct {
		name     string
		vec, avx bool
		has      bool
	}{{"avx512", v, w, w}, {"avx2", v, false, v}, {"go", false, false, true}} {
		if p.has {
			haveVec, have512 = p.vec, p.avx
			run(p.name)
		}
	}
}

// kernelPaths runs fn as a subtest once per kernel (forEachKernel).
func kernelPaths(t *testing.T, fn func(t *testing.T)) {
	forEachKernel(func(name string) { t.Run(name, fn) })
}

// oddFloats returns n float32s mixing normal values of every magnitude
// with the values that test an encode: bfloat16 ties (odd and even, with
// and without a tail), subnormals of float32 and of the narrow types,
// zeros of both signs, the largest finite values, infinities and NaNs.
func oddFloats(rng *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch rng.Intn(16) {
		case 0:
			v[i] = math.Float32frombits(uint32(rng.Intn(1<<16))<<16 | 0x8000) // a bfloat16 tie
		case 1:
			v[i] = math.Float32frombits(rng.Uint32() & 0x807fffff) // a float32 subnormal
		case 2:
			v[i] = float32(math.Copysign(0, float64(1-2*rng.Intn(2))))
		case 3:
			v[i] = math.Float32frombits(0x7f7f0000 | rng.Uint32()&0x8000ffff) // near the largest float32
		case 4:
			v[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 6e-8, 65504}[rng.Intn(5)]
		default:
			v[i] = float32(rng.NormFloat64() * scale * math.Pow(2, float64(rng.Intn(16)-8)))
		}
	}
	return v
}

// factorFloats returns n adapter values: normal, a few zeros, a few large
// enough for the products to overflow, and rarely an infinity or a NaN
// (rare, so that most rank sums stay finite).
func factorFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch x := rng.Intn(1000); {
		case x == 0:
			v[i] = float32(math.Inf(1 - 2*rng.Intn(2)))
		case x == 1:
			v[i] = float32(math.NaN())
		case x < 20:
			v[i] = float32(math.Copysign(0, float64(1-2*rng.Intn(2))))
		case x < 30:
			v[i] = float32(rng.NormFloat64() * 1e19)
		default:
			v[i] = float32(rng.NormFloat64() * math.Pow(2, float64(rng.Intn(8)-6)))
		}
	}
	return v
}

// bothNaN reports whether the elements g and w of dtype d are both NaN:
// the float32 and float16 encodes keep a NaN's sign, which the hardware
// and Go's arithmetic choose differently when the adapter's values are
// NaN (docs/merge.md); bfloat16's is canonical and compared as bits.
func bothNaN(d dtype.DType, g, w []byte) bool {
	if d == dtype.BFloat16 {
		return false
	}
	x, y := dtype.ToFloat32(d, g), dtype.ToFloat32(d, w)
	return x != x && y != y
}

// naiveMergeRows is mergeRows' statement element by element, with the
// per-element codecs of dtype and fma32 (TestFMA32): decode, for each
// adapter d summed over k in order with fused multiply-adds and added as
// c + float32(s * d), encode.
func naiveMergeRows(to dtype.DType, src []byte, from dtype.DType, fs []factor, cols, r0, r1 int) []byte {
	is, os := from.Size(), to.Size()
	out := make([]byte, (r1-r0)*cols*os)
	for i := 0; i < r1-r0; i++ {
		for j := 0; j < cols; j++ {
			e := i*cols + j
			c := dtype.ToFloat32(from, src[e*is:])
			for _, f := range fs {
				var d float32
				for k := 0; k < f.r; k++ {
					d = fma32(f.l[(r0+i)*f.r+k], f.rm[k*cols+j], d)
				}
				c = float32(c + float32(f.s*d))
			}
			dtype.PutFloat32(to, out[e*os:], c)
		}
	}
	return out
}

// TestMergeRowsKernels: mergeRows gives the bytes of the element-by-element
// statement through each kernel forced in turn (AVX-512 with its fused
// bfloat16 decode and encode, AVX2, portable), on bfloat16, float16 and
// float32 weights written as themselves and cast, ranks 1, 8, 16 and 64,
// widths that are and are not multiples of the 64-column kernels and the
// 256-column tile, row counts that are not multiples of the AVX-512
// kernel's four, blocks that start at odd rows, one and two weighted
// adapters, and base and adapter values that test the encode: ties,
// subnormals, overflow to infinity, infinities and NaNs.
func TestMergeRowsKernels(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	type pair struct{ from, to dtype.DType }
	pairs := []pair{{dtype.BFloat16, dtype.BFloat16}, {dtype.BFloat16, dtype.Float32}, {dtype.Float16, dtype.Float16}, {dtype.Float32, dtype.Float32}, {dtype.Float32, dtype.BFloat16}}
	for _, r := range []int{1, 8, 16, 64} {
		for _, cols := range []int{64, 300, 1088} {
			for _, na := range []int{1, 2} {
				rows := 11
				fs := make([]factor, na)
				for a := range fs {
					fs[a] = factor{l: factorFloats(rng, rows*r), rm: factorFloats(rng, r*cols), r: r, s: []float32{2, -0.375}[a]}
				}
				base := oddFloats(rng, rows*cols, 1)
				for _, p := range pairs {
					src := make([]byte, len(base)*p.from.Size())
					dtype.EncodeFloat32(p.from, src, base)
					name := fmt.Sprintf("r%d/cols%d/adapters%d/%s-%s", r, cols, na, p.from, p.to)
					for _, blk := range [][2]int{{0, rows}, {1, 10}, {3, 8}} {
						r0, r1 := blk[0], blk[1]
						is := cols * p.from.Size()
						in := src[r0*is : r1*is]
						want := naiveMergeRows(p.to, in, p.from, fs, cols, r0, r1)
						kernelPaths(t, func(t *testing.T) {
							got := make([]byte, len(want))
							mergeRows(got, p.to, in, p.from, fs, cols, r0, r1)
							os := p.to.Size()
							for i := 0; i < len(got); i += os {
								g, w := got[i:i+os], want[i:i+os]
								if string(g) != string(w) && !bothNaN(p.to, g, w) {
									t.Fatalf("%s rows %d-%d: element %d = %x, want %x", name, r0, r1, i/os, g, w)
								}
							}
						})
					}
				}
			}
		}
	}
}

// BenchmarkMergeRows: one block of 64 rows of a 2048-column bfloat16
// weight (256 KiB, what convert hands MergeRows) merged with a rank-16
// adapter, through each kernel.
func BenchmarkMergeRows(b *testing.B) {
	const rows, cols, r = 64, 2048, 16
	rng := rand.New(rand.NewSource(1))
	fs := []factor{{l: randFloats(rng, rows*r), rm: randFloats(rng, r*cols), r: r, s: 2}}
	src := make([]byte, rows*cols*2)
	dtype.EncodeFloat32(dtype.BFloat16, src, randFloats(rng, rows*cols))
	dst := make([]byte, len(src))
	forEachKernel(func(name string) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				mergeRows(dst, dtype.BFloat16, src, dtype.BFloat16, fs, cols, 0, rows)
			}
		})
	})
}
