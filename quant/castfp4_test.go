package quant

import (
	"math"
	"math/rand"
	"testing"
)

// castFP4 against the definition cast_to_fp4 implements: the nearest
// E2M1 value to |x| clamped to 6, a tie going to the even code, the sign
// in bit 3 for x < 0 (and for a negative NaN), none for -0.0. Probed at
// every midpoint and its float32 neighbours, where a threshold written
// with the wrong comparison shows, and on random values.
func TestCastFP4Nearest(t *testing.T) {
	grid := fp4E2M1[:8]
	ref := func(x float32) byte {
		if x != x {
			return byte(math.Float32bits(x)>>31) << 3
		}
		a := math.Min(math.Abs(float64(x)), 6)
		best := 0
		for i := 1; i < len(grid); i++ {
			d, bd := math.Abs(a-float64(grid[i])), math.Abs(a-float64(grid[best]))
			if d < bd || d == bd && i%2 == 0 {
				best = i
			}
		}
		c := byte(best)
		if x < 0 {
			c |= 8
		}
		return c
	}
	var probes []float32
	for i := 0; i+1 < len(grid); i++ {
		m := (grid[i] + grid[i+1]) / 2
		probes = append(probes, m, math.Nextafter32(m, 0), math.Nextafter32(m, 10), grid[i])
	}
	probes = append(probes, 6, 7, float32(math.Inf(1)), float32(math.NaN()), 0, 1e-30)
	r := rand.New(rand.NewSource(5))
	for range 10000 {
		probes = append(probes, float32(r.NormFloat64()*3))
	}
	for _, p := range probes {
		for _, x := range []float32{p, -p} {
			if got, want := castFP4(x), ref(x); got != want {
				t.Errorf("castFP4(%g) = %d, want %d", x, got, want)
			}
		}
	}
	if got := castFP4(float32(math.Copysign(0, -1))); got != 0 {
		t.Errorf("castFP4(-0) = %d, want 0 (torch.sign(-0.0) is +0)", got)
	}
}
