package verify

import (
	"math"
	"math/rand"
	"testing"
)

// TestAddF32MatchesAdd: the float32 kernel gives add's statistics on the
// same pairs widened to float64, with NaNs, infinities, zeros of both
// signs, equal elements and a tolerance among them: counts, maxima and
// histogram exactly, sums to 1e-12 (add sums into the accumulator
// directly, addF32 per chunk).
func TestAddF32MatchesAdd(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e-40, 3e38}
	x, y := make([]float32, 10007), make([]float32, 10007)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(6)-3)))
		switch rng.Intn(5) {
		case 0:
			y[i] = x[i]
		case 1:
			y[i] = special[rng.Intn(len(special))]
		case 2:
			x[i] = special[rng.Intn(len(special))]
			y[i] = special[rng.Intn(len(special))]
		default:
			y[i] = x[i] + float32(1e-3*rng.NormFloat64())
		}
	}
	tol := tolerance{on: true, atol: 1e-4, rtol: 1e-3}
	var want, got acc
	xf, yf := make([]float64, len(x)), make([]float64, len(y))
	for i := range x {
		xf[i], yf[i] = float64(x[i]), float64(y[i])
	}
	want.add(xf, yf, tol)
	var h hist2
	for lo := 0; lo < len(x); lo += 1000 { // in chunks, as diffPair calls it
		hi := min(lo+1000, len(x))
		got.addF32(x[lo:hi], y[lo:hi], tol, &h)
	}
	got.flush(&h)
	if got.n != want.n || got.differing != want.differing || got.nanMis != want.nanMis || got.infMis != want.infMis ||
		got.over != want.over || got.finite != want.finite || got.zero != want.zero || got.neg != want.neg || got.pos != want.pos {
		t.Fatalf("counts differ:\n got %+v\nwant %+v", got, want)
	}
	if got.maxAbs != want.maxAbs || got.maxRel != want.maxRel {
		t.Errorf("max abs %v rel %v, want %v %v", got.maxAbs, got.maxRel, want.maxAbs, want.maxRel)
	}
	for _, p := range [][2]float64{{got.sumD2, want.sumD2}, {got.sumA2, want.sumA2}, {got.sumB2, want.sumB2}, {got.sumAB, want.sumAB}} {
		if math.Abs(p[0]-p[1]) > 1e-12*math.Abs(p[1]) {
			t.Errorf("sum %v, want %v", p[0], p[1])
		}
	}
	if want.nanMis == 0 || want.infMis == 0 || want.over == 0 || want.zero == 0 || !math.IsInf(want.maxRel, 1) {
		t.Errorf("the data misses a case: %+v", want)
	}
	// A finite maximum relative error, found without dividing every
	// element: the same bits as dividing every one.
	var g2, w2 acc
	x2, y2 := x[:0:0], y[:0:0]
	for i := range x {
		if b := y[i]; b != 0 && !math.IsNaN(float64(b)) && !math.IsInf(float64(b), 0) && !math.IsInf(float64(x[i]), 0) && !math.IsNaN(float64(x[i])) {
			x2, y2 = append(x2, x[i]), append(y2, b)
		}
	}
	xf, yf = xf[:len(x2)], yf[:len(x2)]
	for i := range x2 {
		xf[i], yf[i] = float64(x2[i]), float64(y2[i])
	}
	w2.add(xf, yf, tol)
	g2.addF32(x2, y2, tol, &h)
	if g2.maxRel != w2.maxRel || math.IsInf(w2.maxRel, 0) {
		t.Errorf("finite max rel %v, want %v", g2.maxRel, w2.maxRel)
	}
	// Maxima a hair apart: each later one counts.
	var g3, w3 acc
	a3, b3 := []float32{1.5, 1.5 + 0x1p-22, 3 + 0x1p-20, -0.75}, []float32{1, 1, 2, -0.5}
	g3.addF32(a3, b3, tol, &h)
	w3.add([]float64{1.5, 1.5 + 0x1p-22, 3 + 0x1p-20, -0.75}, []float64{1, 1, 2, -0.5}, tol)
	if g3.maxRel != w3.maxRel || w3.maxRel <= 0.5 {
		t.Errorf("max rel %v, want %v", g3.maxRel, w3.maxRel)
	}
}
