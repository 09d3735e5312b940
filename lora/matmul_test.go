package lora

import (
	"math"
	"math/big"
	"math/rand"
	"testing"
)

// TestFMA32: fma32 is x*y + z computed exactly (big.Float) and rounded once
// to float32, on random operands of every magnitude, products that cancel
// z, results halfway between two float32s with and without a tail below
// float64's precision, subnormal results, and overflow to infinity.
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	exact := func(x, y, z float32) float32 {
		if math.IsInf(float64(x), 0) || math.IsInf(float64(y), 0) || math.IsInf(float64(z), 0) {
			return float32(float64(x)*float64(y) + float64(z))
		}
		p := new(big.Float).SetPrec(400).Mul(big.NewFloat(float64(x)), big.NewFloat(float64(y)))
		f, _ := p.Add(p, big.NewFloat(float64(z))).Float32()
		if f == 0 && math.Signbit(float64(x)) != math.Signbit(float64(y)) && z == 0 && math.Signbit(float64(z)) {
			return float32(math.Copysign(0, -1))
		}
		return f
	}
	rnd := func() float32 {
		switch rng.Intn(4) {
		case 0: // any bits but NaN
			for {
				if f := math.Float32frombits(rng.Uint32()); f == f {
					return f
				}
			}
		case 1: // mantissas with few bits set, ties more likely
			return float32(math.Ldexp(float64(rng.Intn(1<<12)|1), rng.Intn(60)-40)) * float32(1-2*rng.Intn(2))
		default:
			return float32(rng.NormFloat64() * math.Pow(2, float64(rng.Intn(40)-20)))
		}
	}
	check := func(x, y, z float32) {
		if got, want := fma32(x, y, z), exact(x, y, z); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%08x), want %g (%08x)", x, y, z, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
	for range 300000 {
		x, y := rnd(), rnd()
		check(x, y, rnd())
		check(x, y, -float32(float64(x)*float64(y))) // the product's float32 rounding cancelled
	}
	// z + a product a half float32 ulp of z away, plus or minus a tail far
	// below a float64 ulp: double rounding through float64 would tie.
	for range 100000 {
		z := float32(1+rng.Float64()) * float32(math.Ldexp(1, rng.Intn(40)-20))
		half := math.Ldexp(1, math.Ilogb(float64(z))-24)
		for _, tail := range []float64{0, 1, -1} {
			// x*y = half * (1 + tail * 2^-23) exactly: y = 1 + tail*2^-23.
			x := float32(half)
			y := float32(1 + tail*math.Ldexp(1, -23))
			check(x, y, z)
			check(-x, y, z)
		}
	}
	for _, c := range [][3]float32{{1e-30, 1e-10, 0}, {1e-20, 1e-20, 1e-45}, {3e38, 2, -3e38}, {3e38, 3e38, 0}, {float32(math.Inf(1)), 1, 1}, {0, -1, float32(math.Copysign(0, -1))}} {
		check(c[0], c[1], c[2])
	}
}

// naiveAddMatMul is AddMatMul's statement written out element by element:
// each term fused (fma32, checked against big.Float by TestFMA32), the
// scaling and the add rounded to float32 by hand.
func naiveAddMatMul(c, l, rm []float32, m, n, r int, s float32) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var d float32
			for k := 0; k < r; k++ {
				d = fma32(l[i*r+k], rm[k*n+j], d)
			}
			c[i*n+j] = float32(c[i*n+j] + float32(s*d))
		}
	}
}

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		if i%97 == 5 {
			v[i] = 0 // exact zeros and signed zeros among the terms
		}
		if i%89 == 3 {
			v[i] = float32(math.Copysign(0, -1))
		}
	}
	return v
}

// TestAddMatMulOrder: the vector kernels (AVX-512 and AVX2 where the CPU
// has them, each forced in turn) and the portable one give the bits of the naive loop in the stated order, on
// widths with and without a vector remainder, past the column block, with
// enough rows to be split over the CPUs, ranks 1 to 64.
func TestAddMatMulOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, sh := range [][3]int{{1, 1, 1}, {3, 64, 2}, {5, 65, 3}, {40, 1000, 16}, {33, 2112, 8}, {17, 300, 64}, {64, 129, 1}, {9, 448, 16}, {5, 192, 3}} {
		m, n, r := sh[0], sh[1], sh[2]
		c, l, rm := randFloats(rng, m*n), randFloats(rng, m*r), randFloats(rng, r*n)
		want := append([]float32{}, c...)
		naiveAddMatMul(want, l, rm, m, n, r, -0.375)
		kernelPaths(t, func(t *testing.T) {
			got := append([]float32{}, c...)
			AddMatMul(got, l, rm, m, n, r, -0.375)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v: element %d = %v, want %v", sh, i, got[i], want[i])
				}
			}
		})
	}
}

// BenchmarkAddMatMul: AddMatMulT's 4096x4096 weight and rank-16 delta,
// with A as stored (no transpose).
func BenchmarkAddMatMul(b *testing.B) {
	const m, n, r = 4096, 4096, 16
	rng := rand.New(rand.NewSource(1))
	c, l, rm := make([]float32, m*n), randFloats(rng, m*r), randFloats(rng, r*n)
	b.SetBytes(int64(m * n * 4))
	for i := 0; i < b.N; i++ {
		AddMatMul(c, l, rm, m, n, r, 0.5)
	}
}
