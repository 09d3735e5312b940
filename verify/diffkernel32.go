package verify

import (
	"math"
	"math/bits"
)

// The block kernel (statsBF16BF16Block, diffkernel32_amd64.s) computes a
// bfloat16 pair's statistics in float32, sixteen lanes a register, and
// adds its float32 sums into the float64 lanes every blockSteps steps of
// blockPairs pairs; its histogram is bit-sliced (blockHist). It takes a
// step only when every pair of it is in the range where float32
// arithmetic is exact or bounded:
//
//   - both magnitudes zero, or the smaller in [2^-55, 2^45) and the larger
//     at most 2^15 times it (their bfloat16 bits at most 15 binades apart,
//     so below 2^60): d = a-b is then exact in float32 (an integer multiple
//     of the smaller's unit 2^(e-7) below 2^(e+17), e the smaller's
//     exponent), so max |d|, the histogram slot of d and the
//     relative-error test are the float64 kernels' bits;
//   - so no NaN or infinity, and no product or block sum overflows or
//     underflows: |d|, |a+b| are 0 or in [2^-62, 2^61), every product in
//     [2^-124, 2^122) (a normal float32), a lane's block sum below 2^126.
//
// Each sum is a fused multiply-add a lane (the product exact within it,
// one rounding of relative 2^-24 an addition); a lane adds 2*blockSteps
// terms in float32 before the float64 lanes take them (exactly), so a
// sum's error is at most (2*blockSteps+1)*2^-24 of the sum of its terms'
// magnitudes (Higham (4.4), gamma_17 < 2^-19.9), plus the float64 sums'
// n*2^-53: the bound the tests hold (blockSumBound) and docs/cli-json.md
// states. Counts, max |A-B|, max |A-B|/|B| and the histogram are exact
// (the float64 kernels' bits).
//
// A step outside that range (or with a possible new maximum relative
// error, tested as |d| > relThr32*|b| rounded down) is left to the
// float64 kernels.
const (
	blockPairs = 32
	blockSteps = 8
)

// The block kernel's histogram: slot d>>23 (a float32's sign and biased
// exponent), histCopies32 counts each (a lane's, in even and odd
// elements).
const (
	histSlots32  = 512
	histCopies32 = 32
)

// roundDown32 returns the largest float32 not above r >= 0 (the largest
// finite one for r past it).
func roundDown32(r float64) float32 {
	if r > math.MaxFloat32 {
		return math.MaxFloat32
	}
	f := float32(r)
	if float64(f) > r {
		f = math.Nextafter32(f, 0)
	}
	return f
}

// blockHist is the block kernel's histogram state (f32Kernel.blk; the
// kernel reads it by offset, diffkernel32_amd64.s). Each difference sets
// one bit of its lane's 32-bit word: bit e-base of the low 16 bits for
// d > 0, of the high 16 for d < 0 (e its float32 biased exponent, within
// the window [base, base+16)); those words are counted bit by bit in
// carry-save form (Harley-Seal): planes of weight 1 to 8 (the kernel's
// registers between calls), carries of weight 2 to 8 waiting when a call
// ends inside its tree of eight steps, planes of weight 16 to 2^20 in
// memory (deep enough that Go reads them only when the window moves and
// once a tensor). A nonzero difference outside the window is counted in hist32;
// a zero one nowhere (flush32 counts the zeros as what is left).
type blockHist struct {
	base    int32 // 0
	_       [15]uint32
	planes  [4][16]uint32  // 64
	pend    [3][16]uint32  // 320
	mplanes [17][16]uint32 // 512
	scratch [32]uint32     // 1600: the slots of a step's differences outside the window
}

// blockCounts is what Go keeps of the block kernel's histogram.
type blockCounts struct {
	bits    [32]int64 // counts by window bit, read from the planes (base's)
	set     bool      // the window is set for this tensor
	steps   int       // steps counted in the planes since read
	taken   int64     // pairs the block kernel took
	counted int64     // of them, nonzero differences moved to the bins
}

// blockMaxSteps is how many steps the planes hold (each adds at most 2 a
// bit: 21 planes count to 2^21-1).
const blockMaxSteps = 1<<20 - 1

// readPlanes adds the counts of the planes (and the waiting carries) to
// bits and clears them.
func (k *f32Kernel) readPlanes() {
	b := &k.blk
	for j := range b.planes {
		k.addBits(&b.planes[j], 1<<j)
	}
	k.readPend()
	for j := range b.mplanes {
		k.addBits(&b.mplanes[j], 16<<j)
	}
	k.blkGo.steps = 0
}

// readPend adds the carries a call left waiting (weights 2, 4, 8) to bits.
func (k *f32Kernel) readPend() {
	for j := range k.blk.pend {
		k.addBits(&k.blk.pend[j], 2<<j)
	}
}

// addBits adds w to bits for each bit set in p's lanes and clears p.
func (k *f32Kernel) addBits(p *[16]uint32, w int64) {
	for l, v := range p {
		for v != 0 {
			k.blkGo.bits[bits.TrailingZeros32(v)] += w
			v &= v - 1
		}
		p[l] = 0
	}
}

// binsOut moves bits (the window at base) to s's histogram.
func (k *f32Kernel) binsOut(s *acc) {
	g := &k.blkGo
	for p, c := range g.bits {
		if c == 0 {
			continue
		}
		e := int(k.blk.base) + p%16
		bin := min(max(e-126-histLo, 0), HistogramBins-1)
		if p < 16 {
			s.pos[bin] += c
		} else {
			s.neg[bin] += c
		}
		g.counted += c
		g.bits[p] = 0
	}
}

// blockWindow places the window before a call of the block kernel: its
// top at the exponent of the largest difference so far (or 2^-5 before
// any), the counts of a window moved read out first.
func (k *f32Kernel) blockWindow(s *acc, steps int) {
	base, top := int32(127-20), s.maxAbs
	for _, m := range k.maxAbs {
		top = max(top, m)
	}
	if top > 0 && top <= math.MaxFloat32 {
		base = max(int32(math.Float32bits(float32(top))>>23)-15, 1)
	}
	g := &k.blkGo
	if g.set && base != k.blk.base {
		k.readPlanes()
		k.binsOut(s)
	}
	if g.steps+steps > blockMaxSteps {
		k.readPlanes()
	}
	g.set = true
	k.blk.base = base
}

// flush32 adds the block kernel's histogram to s's bins and clears it,
// returning its count of zero differences: the pairs it took less the
// nonzero differences counted (hist32's slots 0 and 256 are zeros, the
// others normal float32 values, exponent field 1 to 254).
func (s *acc) flush32(k *f32Kernel) int64 {
	slot := func(i int) int64 { return sumClear(k.hist32[i][:]) }
	k.readPlanes()
	k.binsOut(s)
	g := &k.blkGo
	nonzero := g.counted
	slot(0)
	slot(256)
	for e := 1; e < 255; e++ {
		// the float64 kernels' bin of biased exponent e-127+1023
		bin := min(max(e-126-histLo, 0), HistogramBins-1)
		p, n := slot(e), slot(256+e)
		s.pos[bin] += p
		s.neg[bin] += n
		nonzero += p + n
	}
	zero := g.taken - nonzero
	*g = blockCounts{}
	return zero
}
