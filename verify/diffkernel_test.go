package verify

import (
	"math"
	"math/rand"
	"reflect"
	"testing"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
)

// The vector paths the CPU has (useVec, useAVX512 as the package set
// them): the tests force each in turn (setKernels).
var hasVec, hasAVX512 = useVec, useAVX512

// vecModes are the vector kernel paths this CPU runs: "avx2", "avx512".
func vecModes() []string {
	var m []string
	if hasVec {
		m = append(m, "avx2")
	}
	if hasAVX512 {
		m = append(m, "avx512")
	}
	return m
}

// setKernels forces the kernels of mode ("go", "avx2" or "avx512") and
// returns the function that restores the package's choice.
func setKernels(mode string) func() {
	v, w := useVec, useAVX512
	useVec, useAVX512 = mode != "go", mode == "avx512"
	return func() { useVec, useAVX512 = v, w }
}

// kernels runs fn with the Go kernel, then with each vector kernel the
// CPU has.
func kernels(t *testing.T, fn func(t *testing.T)) {
	for _, m := range append([]string{"go"}, vecModes()...) {
		restore := setKernels(m)
		t.Run(m, fn)
		restore()
	}
}

// histClear fails t unless every histogram slot of k is zero: flush
// clears the slots it reads, so a count left is one it missed.
func histClear(t *testing.T, k *f32Kernel) {
	t.Helper()
	for i := range k.hist {
		if k.hist[i] != [histCopies]int64{} {
			t.Fatalf("histogram slot %#x not read by flush: %v", i, k.hist[i])
		}
	}
	for i := range k.hist32 {
		if k.hist32[i] != [histCopies32]int64{} {
			t.Fatalf("block histogram slot %#x not read by flush: %v", i, k.hist32[i])
		}
	}
	if b := k.blk; b.planes != [4][16]uint32{} || b.pend != [3][16]uint32{} || b.mplanes != [17][16]uint32{} || k.blkGo != (blockCounts{}) {
		t.Fatalf("block histogram counters not read by flush: %+v %+v", b, k.blkGo)
	}
}

// sumBound is a bound on the rounding error of a float64 sum of n terms
// whose absolute values sum to abs, in any order: n*u/(1-n*u) * abs, u
// the unit roundoff (Higham, Accuracy and Stability, (4.4)); the products
// themselves are exact (float32 by float32).
func sumBound(n int, abs float64) float64 {
	nu := float64(n) * 0x1p-53
	return nu / (1 - nu) * abs
}

// mixedPairs returns n float32 pairs with NaNs, infinities, zeros of both
// signs, subnormals, equal elements and small differences among them.
func mixedPairs(seed int64, n int) (x, y []float32) {
	rng := rand.New(rand.NewSource(seed))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1e-40, 3e38, -3e38}
	x, y = make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(6)-3)))
		switch rng.Intn(6) {
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
	return x, y
}

// TestAddF32MatchesAdd: the float32 kernels (Go and vector) give add's
// statistics on the same pairs widened to float64, with NaNs,
// infinities, zeros of both signs, equal elements and a tolerance among
// them: counts, maxima and histogram exactly, sums within the rounding
// bound of a sum of that many terms.
func TestAddF32MatchesAdd(t *testing.T) {
	kernels(t, func(t *testing.T) {
		x, y := mixedPairs(3, 10007)
		tol := tolerance{on: true, atol: 1e-4, rtol: 1e-3}
		var want, got acc
		xf, yf := make([]float64, len(x)), make([]float64, len(y))
		for i := range x {
			xf[i], yf[i] = float64(x[i]), float64(y[i])
		}
		want.add(xf, yf, tol)
		var k f32Kernel
		for lo := 0; lo < len(x); lo += 1001 { // in chunks, as diffPair calls it, most not a multiple of 4
			hi := min(lo+1001, len(x))
			got.addF32(x[lo:hi], y[lo:hi], tol, &k)
		}
		got.flush(&k)
		histClear(t, &k)
		if got.n != want.n || got.differing != want.differing || got.nanMis != want.nanMis || got.infMis != want.infMis ||
			got.over != want.over || got.finite != want.finite || got.zero != want.zero || got.neg != want.neg || got.pos != want.pos {
			t.Fatalf("counts differ:\n got %+v\nwant %+v", got, want)
		}
		if got.maxAbs != want.maxAbs || got.maxRel != want.maxRel {
			t.Errorf("max abs %v rel %v, want %v %v", got.maxAbs, got.maxRel, want.maxAbs, want.maxRel)
		}
		var absD2, absA2, absB2, absDS float64
		for i := range xf {
			if a, b := xf[i], yf[i]; a-b-(a-b) == 0 {
				absD2 += (a - b) * (a - b)
				absA2 += a * a
				absB2 += b * b
				absDS += math.Abs((a - b) * (a + b))
			}
		}
		for _, p := range [][3]float64{{got.sumD2, want.sumD2, absD2}, {got.sumA2, want.sumA2, absA2}, {got.sumB2, want.sumB2, absB2}, {got.sumDS, want.sumDS, absDS}} {
			if math.Abs(p[0]-p[1]) > 2*sumBound(len(x), p[2]) {
				t.Errorf("sum %v, want %v (bound %v)", p[0], p[1], 2*sumBound(len(x), p[2]))
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
		g2.addF32(x2, y2, tol, &k)
		if g2.maxRel != w2.maxRel || math.IsInf(w2.maxRel, 0) {
			t.Errorf("finite max rel %v, want %v", g2.maxRel, w2.maxRel)
		}
		// Maxima a hair apart: each later one counts.
		var g3, w3 acc
		a3, b3 := []float32{1.5, 1.5 + 0x1p-22, 3 + 0x1p-20, -0.75, 1, 1, 1, 1.5 + 0x1p-21}, []float32{1, 1, 2, -0.5, 1, 1, 1, 1}
		g3.addF32(a3, b3, tol, &k)
		var a3f, b3f []float64
		for i := range a3 {
			a3f, b3f = append(a3f, float64(a3[i])), append(b3f, float64(b3[i]))
		}
		w3.add(a3f, b3f, tol)
		if g3.maxRel != w3.maxRel || w3.maxRel <= 0.5 {
			t.Errorf("max rel %v, want %v", g3.maxRel, w3.maxRel)
		}
	})
}

// TestVecKernelMatchesGo: the vector kernel and the Go kernel on the same
// long runs of finite pairs (where the vector kernel does nearly all):
// counts, maxima and histogram identical, sums within the bound, over
// chunk sizes that leave tails and with a tolerance on and off.
func TestVecKernelMatchesGo(t *testing.T) {
	if !hasVec {
		t.Skip("no AVX2/FMA on this CPU: only the Go kernel runs here")
	}
	rng := rand.New(rand.NewSource(5))
	const n = 1<<16 + 13
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		switch rng.Intn(8) {
		case 0:
			y[i] = x[i]
		case 1: // zeros of both signs (on both sides: the relative error stays finite)
			z := []float32{0, float32(math.Copysign(0, -1))}
			x[i], y[i] = z[rng.Intn(2)], z[rng.Intn(2)]
		case 2: // subnormals, far exponents, the extreme differences
			y[i] = []float32{1e-45, -1e-45, 1e30, -1e-30}[rng.Intn(4)]
			if rng.Intn(64) == 0 {
				e := [][2]float32{{1e-45, -1e-45}, {-3e38, 3e38}}[rng.Intn(2)]
				x[i], y[i] = e[0], e[1]
			}
		default:
			y[i] = x[i] * float32(1+1e-3*rng.NormFloat64())
		}
	}
	for _, tol := range []tolerance{{}, {on: true, atol: 1e-5, rtol: 1e-4}} {
		k := new(f32Kernel)
		run := func(mode string, chunk int) acc {
			defer setKernels(mode)()
			var s acc
			for lo := 0; lo < n; lo += chunk {
				s.addF32(x[lo:min(lo+chunk, n)], y[lo:min(lo+chunk, n)], tol, k)
			}
			s.flush(k)
			histClear(t, k)
			return s
		}
		want := run("go", n)
		for _, c := range []struct {
			mode  string
			chunk int
		}{{"avx2", n}, {"avx2", 4096}, {"avx2", 1001}, {"avx512", n}, {"avx512", 4096}, {"avx512", 1001}, {"avx512", 4092}} {
			if c.mode == "avx512" && !hasAVX512 {
				continue
			}
			mode, chunk := c.mode, c.chunk
			got := run(mode, chunk)
			if got.n != want.n || got.differing != want.differing || got.over != want.over || got.finite != want.finite ||
				got.zero != want.zero || got.neg != want.neg || got.pos != want.pos || got.maxAbs != want.maxAbs || got.maxRel != want.maxRel {
				t.Fatalf("%s tol %v chunk %d:\n got %+v\nwant %+v", mode, tol, chunk, got, want)
			}
			for _, p := range [][2]float64{{got.sumD2, want.sumD2}, {got.sumA2, want.sumA2}, {got.sumB2, want.sumB2}} {
				if math.Abs(p[0]-p[1]) > 2*sumBound(n, p[1]) {
					t.Errorf("%s chunk %d: sum %v, want %v", mode, chunk, p[0], p[1])
				}
			}
		}
		if want.zero == 0 || want.differing == 0 || tol.on && want.over == 0 || math.IsInf(want.maxRel, 0) || want.pos[0] == 0 || want.neg[HistogramBins-1] == 0 {
			t.Errorf("the data misses a case: %+v", want)
		}
	}
}

// TestAddEqualF32: the sum of squares of equal elements, NaN and
// infinities left out, the same with the vector kernel and without.
func TestAddEqualF32(t *testing.T) {
	x, _ := mixedPairs(7, 1003)
	var want acc
	xf := make([]float64, len(x))
	for i := range x {
		xf[i] = float64(x[i])
	}
	want.addEqual(xf)
	kernels(t, func(t *testing.T) {
		var got acc
		got.addEqualF32(x)
		if got.n != want.n || got.finite != want.finite || got.zero != want.zero || want.finite == int64(len(x)) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		if math.Abs(got.sumA2-want.sumA2) > 2*sumBound(len(x), want.sumA2) || got.sumA2 != got.sumB2 || got.sumDS != 0 {
			t.Errorf("sums %v %v %v, want %v", got.sumA2, got.sumB2, got.sumDS, want.sumA2)
		}
	})
}

// TestVecKernelDTypes: the vector kernels that read bfloat16 elements as
// they are (bf16 against bf16, f32 against bf16 and back) give what the Go
// kernel gives on the decoded values, NaNs, infinities and tails
// included; so does the sum of squares of equal bfloat16 chunks.
func TestVecKernelDTypes(t *testing.T) {
	if !hasVec {
		t.Skip("no AVX2/FMA on this CPU: only the Go kernel runs here")
	}
	x, y := mixedPairs(11, 4099)
	enc := func(d dtype.DType, v []float32) []byte {
		b := make([]byte, len(v)*d.Size())
		dtype.EncodeFloat32(d, b, v)
		return b
	}
	tol := tolerance{on: true, atol: 1e-4, rtol: 1e-2}
	for _, p := range [][2]dtype.DType{{dtype.BFloat16, dtype.BFloat16}, {dtype.Float32, dtype.BFloat16}, {dtype.BFloat16, dtype.Float32}, {dtype.Float16, dtype.BFloat16}} {
		ca, cb := enc(p[0], x), enc(p[1], y)
		bufA, bufB := make([]float32, len(x)), make([]float32, len(x))
		k := new(f32Kernel)
		run := func(mode string) acc {
			defer setKernels(mode)()
			var s acc
			for lo := 0; lo < len(x); lo += 1000 {
				hi := min(lo+1000, len(x))
				s.addRaw(p[0], p[1], ca[lo*p[0].Size():hi*p[0].Size()], cb[lo*p[1].Size():hi*p[1].Size()], hi-lo, tol, k, bufA, bufB)
			}
			s.flush(k)
			histClear(t, k)
			return s
		}
		want := run("go")
		for _, mode := range vecModes() {
			got := run(mode)
			if got.n != want.n || got.differing != want.differing || got.nanMis != want.nanMis || got.infMis != want.infMis || got.over != want.over ||
				got.finite != want.finite || got.zero != want.zero || got.neg != want.neg || got.pos != want.pos || got.maxAbs != want.maxAbs || got.maxRel != want.maxRel {
				t.Fatalf("%s %v:\n got %+v\nwant %+v", mode, p, got, want)
			}
			for _, q := range [][2]float64{{got.sumD2, want.sumD2}, {got.sumA2, want.sumA2}, {got.sumB2, want.sumB2}} {
				if math.Abs(q[0]-q[1]) > 2*sumBound(len(x), q[1]) {
					t.Errorf("%s %v: sum %v, want %v", mode, p, q[0], q[1])
				}
			}
		}
		if want.nanMis == 0 || want.zero == 0 || want.over == 0 {
			t.Errorf("%v: the data misses a case: %+v", p, want)
		}
		var we acc
		restore := setKernels("go")
		we.addEqualRaw(p[0], ca, bufA)
		restore()
		for _, mode := range vecModes() {
			var ge acc
			restore := setKernels(mode)
			ge.addEqualRaw(p[0], ca, bufA)
			restore()
			if ge.n != we.n || ge.finite != we.finite || math.Abs(ge.sumA2-we.sumA2) > 2*sumBound(len(x), we.sumA2) {
				t.Errorf("%s %v equal: got %+v, want %+v", mode, p[0], ge, we)
			}
		}
	}
}

// TestKernelLayout: the offsets diffkernel_amd64.s reads f32Kernel at.
func TestKernelLayout(t *testing.T) {
	var k f32Kernel
	got := []uintptr{unsafe.Offsetof(k.sumD2), unsafe.Offsetof(k.sumA2), unsafe.Offsetof(k.sumB2), unsafe.Offsetof(k.sumDS),
		unsafe.Offsetof(k.maxAbs), unsafe.Offsetof(k.over), unsafe.Offsetof(k.relThr), unsafe.Offsetof(k.atol), unsafe.Offsetof(k.rtol),
		unsafe.Offsetof(k.tolOn), unsafe.Offsetof(k.relThr32), unsafe.Offsetof(k.hist), unsafe.Offsetof(k.hist32), unsafe.Offsetof(k.blk),
		unsafe.Offsetof(k.blk) + unsafe.Offsetof(k.blk.planes), unsafe.Offsetof(k.blk) + unsafe.Offsetof(k.blk.pend),
		unsafe.Offsetof(k.blk) + unsafe.Offsetof(k.blk.mplanes), unsafe.Offsetof(k.blk) + unsafe.Offsetof(k.blk.scratch)}
	want := []uintptr{0, 64, 128, 192, 256, 320, 384, 448, 512, 576, 584, 640, 524928, 656000, 656064, 656320, 656512, 657600}
	if !reflect.DeepEqual(got, want) || unsafe.Sizeof(k.hist[0]) != 16*8 || unsafe.Sizeof(k.hist32[0]) != 32*8 {
		t.Errorf("offsets %v, want %v (K_* in diffkernel_amd64.s)", got, want)
	}
}
