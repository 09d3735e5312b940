package lora

import (
	"math"
	"math/rand"
	"testing"
)

// naiveAddMatMul is AddMatMul's statement written out element by element,
// with every operation rounded to float32 by hand.
func naiveAddMatMul(c, l, rm []float32, m, n, r int, s float32) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var d float32
			for k := 0; k < r; k++ {
				p := float32(l[i*r+k] * rm[k*n+j])
				d = float32(d + p)
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

// TestAddMatMulOrder: the vector kernel (where the CPU has one) and the
// portable one give the bits of the naive loop in the stated order, on
// widths with and without a vector remainder, past the column block, with
// enough rows to be split over the CPUs, ranks 1 to 64.
func TestAddMatMulOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, sh := range [][3]int{{1, 1, 1}, {3, 64, 2}, {5, 65, 3}, {40, 1000, 16}, {33, 2112, 8}, {17, 300, 64}, {64, 129, 1}} {
		m, n, r := sh[0], sh[1], sh[2]
		c, l, rm := randFloats(rng, m*n), randFloats(rng, m*r), randFloats(rng, r*n)
		want := append([]float32{}, c...)
		naiveAddMatMul(want, l, rm, m, n, r, -0.375)
		for _, vec := range []bool{true, false} {
			if vec && !haveVec {
				continue
			}
			got := append([]float32{}, c...)
			if vec {
				AddMatMul(got, l, rm, m, n, r, -0.375)
			} else {
				for i := 0; i < m; i++ {
					addRowGo(got[i*n:(i+1)*n], l[i*r:(i+1)*r], rm, n, 0, n, -0.375)
				}
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v vector %v: element %d = %v, want %v", sh, vec, i, got[i], want[i])
				}
			}
		}
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
