package verify

import (
	"math"
)

// The block kernel (statsBF16BF16Block, diffkernel32_amd64.s) computes a
// bfloat16 pair's statistics in float32, sixteen lanes a register, and
// adds its float32 sums into the float64 lanes every blockSteps steps of
// blockPairs pairs. It takes a step only when every pair of it is in the
// range where float32 arithmetic is exact or bounded:
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
// a*a, b*b are exact (two 8-bit significands); d*d and d*(a+b) are
// rounded once (relative 2^-24); each lane adds 2*blockSteps products in
// float32 before the float64 lanes take them, so a sum's error is at most
// (2*blockSteps+1)*2^-24 of the sum of its terms' magnitudes (Higham
// (4.4), gamma_17 < 2^-19.9), plus the float64 sums' (n/8)*2^-53: the
// bound the tests hold (blockSumBound) and docs/cli-json.md states.
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

// flush32 adds the block kernel's histogram to s's bins and clears it,
// returning its count of zero differences. Its differences are 0 or normal
// float32 values (exponent field 1 to 254).
func (s *acc) flush32(k *f32Kernel) int64 {
	slot := func(i int) int64 {
		c := &k.hist32[i]
		var n int64
		for _, v := range c {
			n += v
		}
		*c = [histCopies32]int64{}
		return n
	}
	zero := slot(0) + slot(256)
	for e := 1; e < 255; e++ {
		// the float64 kernels' bin of biased exponent e-127+1023
		bin := min(max(e-126-histLo, 0), HistogramBins-1)
		s.pos[bin] += slot(e)
		s.neg[bin] += slot(256 + e)
	}
	return zero
}
