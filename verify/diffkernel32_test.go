package verify

import (
	"math"
	"math/big"
	"math/rand"
	"slices"
	"testing"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
)

// bf16 returns v's bfloat16 encoding (v must be one: its low 16 bits zero).
func bf16(t testing.TB, v float32) uint16 {
	b := math.Float32bits(v)
	if b&0xffff != 0 {
		t.Fatalf("%v is not a bfloat16", v)
	}
	return uint16(b >> 16)
}

// encBF16 encodes values that are bfloat16 already.
func encBF16(t testing.TB, v []float32) []byte {
	out := make([]byte, 2*len(v))
	for i, f := range v {
		h := bf16(t, f)
		out[2*i], out[2*i+1] = byte(h), byte(h>>8)
	}
	return out
}

// roundBF16 rounds v to a bfloat16 value (as a float32).
func roundBF16(v float32) float32 {
	var b [2]byte
	dtype.EncodeFloat32(dtype.BFloat16, b[:], []float32{v})
	return math.Float32frombits(uint32(b[0])<<16 | uint32(b[1])<<24)
}

// blockSumBound is the block kernel's bound on a sum's error (diffkernel32.go):
// (2*blockSteps+1)*2^-24 of the sum of the terms' magnitudes, plus the
// float64 lanes' n*2^-53 of it.
func blockSumBound(n int, abs float64) float64 {
	g := float64(2*blockSteps+1) * 0x1p-24
	return (g/(1-g) + float64(n)*0x1p-53) * abs
}

// runBF16 returns the statistics of the bfloat16 pairs ca, cb (n of
// them) with the kernels of mode ("go", "avx2", "avx512": the float64
// kernels; "block": the block kernel and AVX-512), read in chunks.
func runBF16(t *testing.T, mode string, ca, cb []byte, chunk int) acc {
	t.Helper()
	restore := setKernels(map[string]string{"block": "avx512"}[mode] + map[bool]string{true: mode}[mode != "block"])
	defer restore()
	defer func(v bool) { useBlock = v }(useBlock)
	useBlock = mode == "block"
	n := len(ca) / 2
	var s acc
	k := new(f32Kernel)
	bufA, bufB := make([]float32, n), make([]float32, n)
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		s.addRaw(dtype.BFloat16, dtype.BFloat16, ca[2*lo:2*hi], cb[2*lo:2*hi], hi-lo, tolerance{}, k, bufA, bufB)
	}
	s.flush(k)
	histClear(t, k)
	return s
}

// termSums returns the sums of |d^2|, a^2, b^2 and |d*(a+b)| over the
// finite pairs (the scale of each sum's rounding error).
func termSums(ca, cb []byte) (d2, a2, b2, ds float64) {
	x, y := make([]float32, len(ca)/2), make([]float32, len(ca)/2)
	dtype.DecodeFloat32(dtype.BFloat16, x, ca)
	dtype.DecodeFloat32(dtype.BFloat16, y, cb)
	for i := range x {
		a, b := float64(x[i]), float64(y[i])
		if d := a - b; d-d == 0 {
			d2 += d * d
			a2 += a * a
			b2 += b * b
			ds += math.Abs(d * (a + b))
		}
	}
	return
}

// sameCounts fails t unless got and want have the same counts, maxima and
// histogram, and sums within bound (of the terms' magnitudes).
func sameCounts(t *testing.T, what string, got, want acc, ca, cb []byte, bound func(int, float64) float64) {
	t.Helper()
	if got.n != want.n || got.differing != want.differing || got.nanMis != want.nanMis || got.infMis != want.infMis || got.over != want.over ||
		got.finite != want.finite || got.zero != want.zero || got.neg != want.neg || got.pos != want.pos ||
		math.Float64bits(got.maxAbs) != math.Float64bits(want.maxAbs) || math.Float64bits(got.maxRel) != math.Float64bits(want.maxRel) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
	d2, a2, b2, ds := termSums(ca, cb)
	n := int(got.n)
	for _, q := range []struct {
		name           string
		got, want, abs float64
	}{{"d^2", got.sumD2, want.sumD2, d2}, {"a^2", got.sumA2, want.sumA2, a2}, {"b^2", got.sumB2, want.sumB2, b2}, {"d(a+b)", got.sumDS, want.sumDS, ds}} {
		if e := math.Abs(q.got - q.want); e > bound(n, q.abs)+sumBound(n, q.abs) {
			t.Errorf("%s: sum of %s %v, want %v (error %.3g of the terms' %.3g, bound %.3g)", what, q.name, q.got, q.want, e, q.abs, bound(n, q.abs))
		}
	}
}

// adversarialBF16 returns bfloat16 pairs around every edge of the block
// kernel's range (diffkernel32.go), each kind in runs and alone among
// ordinary pairs: zeros of both signs on one or both sides, magnitudes at
// and just past 2^-55 and 2^60, pairs 15 and 16 binades apart (d exact
// in float32 and not), NaN, infinities, subnormals, cancellation (a near
// -b), equal pairs, and the extremes of bfloat16.
func adversarialBF16(t testing.TB, seed int64, n int) (ca, cb []byte) {
	rng := rand.New(rand.NewSource(seed))
	x, y := make([]float32, n), make([]float32, n)
	p2 := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	kinds := []func() (float32, float32){
		func() (float32, float32) { return 0, 0 },
		func() (float32, float32) { return float32(math.Copysign(0, -1)), 0 },
		func() (float32, float32) { return 0, roundBF16(float32(rng.NormFloat64())) },
		func() (float32, float32) { return roundBF16(float32(rng.NormFloat64())), 0 },
		func() (float32, float32) { return p2(-55), p2(-55) * 1.5 },
		func() (float32, float32) { return p2(-56) * 1.9921875, p2(-55) },
		func() (float32, float32) { return p2(59) * 1.9921875, p2(59) * -1.5 },
		func() (float32, float32) { return p2(60), p2(59) },
		func() (float32, float32) { return p2(59) * 1.75, p2(59) * 1.9921875 },
		func() (float32, float32) { return p2(10) * 1.9921875, -p2(-5) * 1.0078125 }, // 15 binades apart
		func() (float32, float32) { return -p2(10) * 1.9921875, p2(-5) * 1.9921875 },
		func() (float32, float32) { return p2(10) * 1.9921875, p2(-6) * 1.0078125 }, // 16: d inexact in float32
		func() (float32, float32) { return p2(0), -p2(-30) * 1.0078125 },
		func() (float32, float32) { return float32(math.NaN()), 1 },
		func() (float32, float32) { return 1, float32(math.Inf(-1)) },
		func() (float32, float32) { return float32(math.Inf(1)), float32(math.Inf(1)) },
		func() (float32, float32) { return p2(-133), p2(-130) },                                // subnormals
		func() (float32, float32) { return 3.3895314e38, -3.3895314e38 },                       // bfloat16's largest
		func() (float32, float32) { v := roundBF16(float32(rng.NormFloat64())); return v, -v }, // cancellation in a+b
		func() (float32, float32) {
			v := roundBF16(float32(rng.NormFloat64()))
			return v, math.Float32frombits(math.Float32bits(v) + 1<<16) // one unit apart
		},
	}
	ordinary := func() (float32, float32) {
		a := roundBF16(float32(0.02 * rng.NormFloat64()))
		return a, roundBF16(a * float32(1+(rng.Float64()-0.5)/8))
	}
	for i := 0; i < n; {
		if rng.Intn(4) == 0 { // a run of one kind
			k := kinds[rng.Intn(len(kinds))]
			for r := rng.Intn(70); r > 0 && i < n; r, i = r-1, i+1 {
				x[i], y[i] = k()
			}
			continue
		}
		for r := rng.Intn(200); r > 0 && i < n; r, i = r-1, i+1 {
			x[i], y[i] = ordinary()
			if rng.Intn(300) == 0 {
				x[i], y[i] = kinds[rng.Intn(len(kinds))]()
			}
		}
	}
	return encBF16(t, x), encBF16(t, y)
}

// TestBlockKernelMatches: the block kernel gives the float64 kernels'
// counts, maxima and histogram bits (Go, AVX2 and AVX-512 agree among
// themselves too), and sums within its bound, on pairs like diff_fp8.sh's
// and on adversarial ones, read in chunks that leave tails.
func TestBlockKernelMatches(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: the block kernel does not run here")
	}
	ca1, cb1 := fp8LikePairs(3, 100003)
	ca2, cb2 := adversarialBF16(t, 4, 200003)
	// fp8-like with some B zero against a small A (a quantized B's zeros:
	// max |A-B|/|B| is +Inf from the first, statsBF16BF16BlockInf's case;
	// max |A-B| and the histogram's window are the ordinary pairs')
	ca3, cb3 := fp8LikePairs(5, 300007)
	for i := 101; i < len(cb3); i += 2 * 4999 {
		cb3[i-1], cb3[i] = 0, 0
		ca3[i-1], ca3[i] = 0, 0x36 // 2^-19
	}
	for _, c := range []struct {
		name   string
		ca, cb []byte
	}{{"fp8-like", ca1, cb1}, {"adversarial", ca2, cb2}, {"fp8-like, B zeros", ca3, cb3}} {
		want := runBF16(t, "go", c.ca, c.cb, 65536)
		for _, m := range vecModes() {
			sameCounts(t, c.name+" "+m, runBF16(t, m, c.ca, c.cb, 65536), want, c.ca, c.cb, func(int, float64) float64 { return 0 })
		}
		for _, chunk := range []int{65536, 4099, 1000, 31} {
			got := runBF16(t, "block", c.ca, c.cb, chunk)
			sameCounts(t, c.name+" block", got, want, c.ca, c.cb, blockSumBound)
			// statsBF16BF16BlockInf is statsBF16BF16Block's arithmetic: the
			// same bits in every field, sums included.
			useBlockInf = false
			if rel := runBF16(t, "block", c.ca, c.cb, chunk); rel != got {
				t.Errorf("%s, chunks of %d: without statsBF16BF16BlockInf\n got %+v\nwant %+v", c.name, chunk, rel, got)
			}
			useBlockInf = true
		}
		if want.zero == 0 || want.differing == 0 {
			t.Errorf("%s: the data misses a case: %+v", c.name, want)
		}
		if c.name == "fp8-like, B zeros" && !math.IsInf(want.maxRel, 1) {
			t.Errorf("%s: the data misses a case: %+v", c.name, want)
		}
		if c.name == "adversarial" && (want.nanMis == 0 || want.infMis == 0 || !math.IsInf(want.maxRel, 1) || want.pos[0]+want.neg[0] == 0) {
			t.Errorf("%s: the data misses a case: %+v", c.name, want)
		}
	}
}

// TestBlockKernelSteps: the block kernel takes every step of pairs in its
// range, edges included, and leaves (returns the index of) a step with
// any one pair outside it, having added nothing of it.
func TestBlockKernelSteps(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: the block kernel does not run here")
	}
	p2 := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	inf := math.Inf(1)
	in := [][2]float32{{0, 0}, {float32(math.Copysign(0, -1)), 0}, {p2(-55), p2(-55)}, {p2(-55), -p2(-41) * 1.9921875},
		{p2(58) * 1.9921875, p2(44)}, {p2(44) * 1.9921875, -p2(58) * 1.9921875}, {-p2(20) * 1.9921875, p2(6)}, {1, 1.0078125}}
	// Outside: the range's edges, pairs whose d is not exact in float32
	// (17 and 25 binades apart; 1-2^-25 rounds up to 1, out of its
	// binade), NaN and infinities (with maxRel +Inf: only the range
	// leaves them), and new maxima of the relative error: |d|/|b| = 1
	// against 1-2^-24, where relThr32*|b| rounded up would not be below |d|.
	out := []struct {
		a, b float32
		rel  float64
	}{{0, 1, inf}, {1, 0, inf}, {p2(-56), p2(-56), inf}, {p2(-56) * 1.9921875, p2(-56) * 1.9921875, inf}, {p2(60), p2(60), inf},
		{p2(45), p2(45), inf}, {p2(59), p2(60), inf}, {p2(20), p2(4) * 1.9921875, inf}, {p2(10) * 1.9921875, p2(-7) * 1.0078125, inf},
		{1, p2(-25), inf}, {-1, -p2(-25), inf}, {p2(-133), p2(-133), inf}, {float32(math.NaN()), 1, inf}, {float32(math.Inf(1)), 1, inf},
		{1, 0.5, 0.9}, {2.015625, 1.0078125, 1 - 0x1p-24}, {0, p2(-120), inf}, {-p2(-113) * 1.9921875, 0, inf}}
	ordinary, _ := fp8LikePairs(9, 64)
	base := make([]float32, 64)
	dtype.DecodeFloat32(dtype.BFloat16, base, ordinary)
	// run runs the block kernel, or (inf) statsBF16BF16BlockInf, which
	// takes only a relative error of +Inf.
	run := func(x, y []float32, rel float64, inf bool) (int, *f32Kernel) {
		k := new(f32Kernel)
		k.setRel(rel)
		ca, cb := encBF16(t, x), encBF16(t, y)
		if inf {
			return statsBF16BF16BlockInf(unsafe.Pointer(&ca[0]), unsafe.Pointer(&cb[0]), len(x), k), k
		}
		return statsBF16BF16Block(unsafe.Pointer(&ca[0]), unsafe.Pointer(&cb[0]), len(x), k), k
	}
	// Ordinary pairs, the window over their differences: every nonzero
	// one counted in the bit-sliced counters, none one by one (hist32).
	func() {
		ca, cb := fp8LikePairs(10, 256)
		x, y := make([]float32, 256), make([]float32, 256)
		dtype.DecodeFloat32(dtype.BFloat16, x, ca)
		dtype.DecodeFloat32(dtype.BFloat16, y, cb)
		var s acc
		for i := range x {
			s.maxAbs = max(s.maxAbs, math.Abs(float64(x[i])-float64(y[i])))
		}
		var nonzero int64
		for i := range x {
			if d := math.Abs(float64(x[i]) - float64(y[i])); d != 0 && d >= s.maxAbs/0x1p14 {
				nonzero++
			}
		}
		k := new(f32Kernel)
		k.setRel(math.Inf(1))
		k.blockWindow(&s, 8)
		if v := statsBF16BF16Block(unsafe.Pointer(&ca[0]), unsafe.Pointer(&cb[0]), 256, k); v != 256 {
			t.Fatalf("ordinary pairs: stopped at %d", v)
		}
		if k.hist32 != [histSlots32][histCopies32]int64{} {
			t.Errorf("ordinary pairs counted one by one")
		}
		k.readPlanes()
		var c int64
		for _, n := range k.blkGo.bits {
			c += n
		}
		if c < nonzero || nonzero < 200 {
			t.Errorf("%d differences in the counters, want at least %d", c, nonzero)
		}
	}()
	for _, p := range in {
		x, y := append([]float32{}, base...), append([]float32{}, base...)
		for i := 0; i < 64; i += 7 {
			x[i], y[i] = p[0], p[1]
		}
		for _, inf := range []bool{false, true} {
			if v, _ := run(x, y, math.Inf(1), inf); v != 64 {
				t.Errorf("%v in range (inf kernel %v): the kernel stopped at %d of 64", p, inf, v)
			}
		}
	}
	// The largest |d| of a step at each of its positions, of either sign:
	// max |A-B| is its magnitude on both kernels.
	for at := range 64 {
		for _, p := range [][2]float32{{-0.5, 0.25}, {0.5, -0.25}} {
			for _, inf := range []bool{false, true} {
				x, y := append([]float32{}, base...), append([]float32{}, base...)
				x[at], y[at] = p[0], p[1]
				v, k := run(x, y, math.Inf(1), inf)
				if m := slices.Max(k.maxAbs[:]); v != 64 || m != 0.75 {
					t.Errorf("%v at %d (inf kernel %v): took %d of 64, max |d| %v, want 0.75", p, at, inf, v, m)
				}
			}
		}
	}
	for _, p := range out {
		for _, at := range []int{0, 17, 32, 63} {
			for _, inf := range []bool{false, true} {
				if inf && !math.IsInf(p.rel, 1) {
					continue
				}
				x, y := append([]float32{}, base...), append([]float32{}, base...)
				x[at], y[at] = p.a, p.b
				v, k := run(x, y, p.rel, inf)
				if v != at&^31 {
					t.Errorf("%v at %d (inf kernel %v): the kernel stopped at %d, want %d", p, at, inf, v, at&^31)
				}
				if v == 0 && (k.sumA2 != [kernelLanes]float64{} || k.maxAbs != [kernelLanes]float64{} || k.hist32 != [histSlots32][histCopies32]int64{} ||
					k.blk.planes != [4][16]uint32{} || k.blk.pend != [3][16]uint32{} || k.blk.mplanes != [17][16]uint32{}) {
					t.Errorf("%v at %d (inf kernel %v): the step left was added", p, at, inf)
				}
			}
		}
	}
}

// TestCosineNearOne: with B = A but for a few elements one bfloat16 unit
// apart, 1-cos (about 1e-13) keeps its digits on every path: the cosine
// is within half a unit of 1 (2^-53, what a float64 near 1 can hold) and
// 4e-6 of ||A-B||^2/(2||A|| ||B||) (about 1-cos) of an exact computation
// (math/big). The quotient of A.B
// by the norms, summed in float64 (the formula before), was off by
// several units of 1.
func TestCosineNearOne(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	const n = 1 << 18
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = roundBF16(float32(rng.NormFloat64()))
		y[i] = x[i]
		if i%40000 == 7 {
			x[i] = roundBF16(float32(1e-2 * rng.NormFloat64()))
			y[i] = math.Float32frombits(math.Float32bits(x[i]) + 1<<16)
		}
	}
	ca, cb := encBF16(t, x), encBF16(t, y)
	prec := uint(400)
	sa, sb, sab := new(big.Float).SetPrec(prec), new(big.Float).SetPrec(prec), new(big.Float).SetPrec(prec)
	for i := range x {
		a, b := new(big.Float).SetPrec(prec).SetFloat64(float64(x[i])), new(big.Float).SetPrec(prec).SetFloat64(float64(y[i]))
		sa.Add(sa, new(big.Float).SetPrec(prec).Mul(a, a))
		sb.Add(sb, new(big.Float).SetPrec(prec).Mul(b, b))
		sab.Add(sab, new(big.Float).SetPrec(prec).Mul(a, b))
	}
	den := new(big.Float).SetPrec(prec).Mul(sa, sb)
	den.Sqrt(den)
	oneMinus := new(big.Float).SetPrec(prec).Quo(sab, den)
	oneMinus.Sub(new(big.Float).SetPrec(prec).SetInt64(1), oneMinus)
	want, _ := oneMinus.Float64()
	if want < 1e-15 || want > 1e-11 {
		t.Fatalf("1-cos %v: not the case meant", want)
	}
	modes := append([]string{"go"}, vecModes()...)
	if hasAVX512 {
		modes = append(modes, "block")
	}
	for _, m := range modes {
		s := runBF16(t, m, ca, cb, 65536)
		got := 1 - cosine(s.sumD2, s.sumA2, s.sumB2, s.sumDS)
		// docs/cli-json.md: within 4e-6 of ||A-B||^2/(2||A|| ||B||), plus half a unit of 1
		scale := s.sumD2 / (2 * math.Sqrt(s.sumA2) * math.Sqrt(s.sumB2))
		if e := math.Abs(got - want); e > 0x1p-53+4e-6*scale {
			t.Errorf("%s: 1-cos %.6g, want %.6g (error %.2g)", m, got, want, e)
		}
	}
}

// TestCosineFormula: cosine from the sums of d^2, a^2, b^2 and d*(a+b)
// against A.B/(||A|| ||B||) computed directly: opposite, scaled,
// orthogonal, zero and random pairs.
func TestCosineFormula(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	r := make([]float64, 50)
	for i := range r {
		r[i] = rng.NormFloat64()
	}
	orth := make([]float64, 50)
	for i := range orth {
		orth[i] = rng.NormFloat64()
	}
	var dot, rr float64
	for i := range r {
		dot += r[i] * orth[i]
		rr += r[i] * r[i]
	}
	for i := range orth {
		orth[i] -= dot / rr * r[i] // orthogonal to r
	}
	scaled := func(c float64) []float64 {
		o := make([]float64, len(r))
		for i := range r {
			o[i] = c * r[i]
		}
		return o
	}
	for _, c := range []struct {
		name string
		b    []float64
		want float64
	}{{"opposite", scaled(-1), -1}, {"scaled", scaled(2.5), 1}, {"orthogonal", orth, 0}, {"zero", make([]float64, 50), 0}, {"random", orth[:0], math.NaN()}} {
		b := c.b
		if len(b) == 0 {
			b = make([]float64, 50)
			for i := range b {
				b[i] = rng.NormFloat64()
			}
			var ab, aa, bb float64
			for i := range r {
				ab, aa, bb = ab+r[i]*b[i], aa+r[i]*r[i], bb+b[i]*b[i]
			}
			c.want = ab / math.Sqrt(aa*bb)
		}
		var s acc
		s.add(r, b, tolerance{})
		if got := cosine(s.sumD2, s.sumA2, s.sumB2, s.sumDS); math.Abs(got-c.want) > 1e-14 {
			t.Errorf("%s: cosine %v, want %v", c.name, got, c.want)
		}
	}
	if cosine(0, 0, 0, 0) != 1 {
		t.Error("two zero tensors: cosine not 1")
	}
}

// TestBlockKernelDeepCounts: runs of one difference long enough that a
// histogram bit's count passes 2^12 to 2^15 in one call (the memory
// planes past the first eight of statsBF16BF16Block; the register planes
// of statsBF16BF16BlockInf at their fullest, one difference in every
// pair: 255 ripples fill them): both kernels' histograms are the float64
// kernels'.
func TestBlockKernelDeepCounts(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512: the block kernel does not run here")
	}
	const n = 1 << 18
	for _, c := range []struct {
		inf   bool
		every int // every every-th pair has d = -2^-8
	}{{false, 3}, {true, 3}, {false, n}, {true, n}} {
		inf := c.inf
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = 1.0078125, 1 // d = 2^-7
			if i%c.every == 0 {
				x[i], y[i] = -0.5, -0.49609375 // d = -2^-8
			}
		}
		x[0], y[0] = 0x1p-20, 0x1p-21 // max |A-B|/|B| 1 from the first step
		if inf {                      // or a B zero: +Inf
			y[0] = 0
		}
		ca, cb := encBF16(t, x), encBF16(t, y)
		want := runBF16(t, "go", ca, cb, n)
		if want.pos[-6-histLo] < n/2 || want.neg[-7-histLo] < int64(n/c.every-1) || math.IsInf(want.maxRel, 1) != inf || !inf && want.maxRel != 1 {
			t.Fatalf("inf %v: the data misses its case: %+v", inf, want)
		}
		sameCounts(t, map[bool]string{false: "block", true: "block, +Inf"}[inf], runBF16(t, "block", ca, cb, n), want, ca, cb, blockSumBound)
	}
}
