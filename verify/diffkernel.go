package verify

import (
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// exactF32 reports whether every value of d is a float32 (decoded by
// dtype.DecodeFloat32 without rounding): such pairs are compared by
// addF32, reading float32s and computing in float64.
func exactF32(d dtype.DType) bool {
	switch d {
	case dtype.Float32, dtype.Float16, dtype.BFloat16,
		dtype.Float8E5M2, dtype.Float8E4M3FN, dtype.Float8E5M2FNUZ, dtype.Float8E4M3FNUZ, dtype.Float8E8M0FNU:
		return true
	}
	return false
}

// relSlack: addF32 divides |d| by |b| only when |d| > maxRel*|b|*(1-relSlack),
// a margin far above the rounding of that product, so that the maximum it
// finds is the one dividing every element would.
const relSlack = 0x1p-40

// hist2 is a histogram in two halves, even and odd elements, so that
// consecutive increments of one bin do not wait on each other: [half][0]
// counts positive differences, [half][1] negative ones.
type hist2 [2][2][HistogramBins]int64

// addF32 is add for float32 values (the elements of x and y widened to
// float64 exactly): the same statistics, with the finite elements in a
// loop that does no division but for a new maximum relative error, and
// the rare NaN or infinite ones handed to add. Its sums are in float64 in
// element order, like add's.
func (s *acc) addF32(x, y []float32, tol tolerance, h *hist2) {
	y = y[:len(x)]
	var sumD2, sumA2, sumB2, sumAB, maxAbs float64
	maxRel := s.maxRel
	relThr := maxRel * (1 - relSlack)
	var differing, finite, zero, over int64
	for i, xf := range x {
		a, b := float64(xf), float64(y[i])
		d := a - b
		if d-d != 0 { // a or b NaN or infinite
			s.add([]float64{a}, []float64{b}, tol)
			s.n-- // counted below
			continue
		}
		finite++
		if d == 0 {
			aa := a * a
			sumA2 += aa
			sumB2 += aa
			sumAB += aa
			zero++
			continue
		}
		differing++
		sumD2 += d * d
		sumA2 += a * a
		sumB2 += b * b
		sumAB += a * b
		ad, ab := math.Abs(d), math.Abs(b)
		if ad > maxAbs { // not max(): ad is a number, and max's NaN and -0 rules cost registers
			maxAbs = ad
		}
		if ad > relThr*ab {
			if ab == 0 {
				maxRel, relThr = math.Inf(1), math.Inf(1)
			} else if r := ad / ab; r > maxRel {
				maxRel, relThr = r, r*(1-relSlack)
			}
		}
		if tol.on && ad > tol.atol+tol.rtol*ab {
			over++
		}
		db := math.Float64bits(d)
		e := int(db>>52&0x7ff) - 1022
		k := min(max(e-histLo, 0), HistogramBins-1)
		h[i&1][db>>63][k]++
	}
	s.n += int64(len(x))
	s.differing += differing
	s.finite += finite
	s.zero += zero
	s.over += over
	s.sumD2 += sumD2
	s.sumA2 += sumA2
	s.sumB2 += sumB2
	s.sumAB += sumAB
	s.maxAbs = max(s.maxAbs, maxAbs)
	s.maxRel = maxRel
}

// flush adds h's counts to s's histogram and clears h.
func (s *acc) flush(h *hist2) {
	for i := range s.neg {
		s.pos[i] += h[0][0][i] + h[1][0][i]
		s.neg[i] += h[0][1][i] + h[1][1][i]
	}
	*h = hist2{}
}

// addEqualF32 is addEqual for float32 values.
func (s *acc) addEqualF32(x []float32) {
	var sum float64
	var finite int64
	for _, f := range x {
		a := float64(f)
		if a-a == 0 {
			sum += a * a
			finite++
		}
	}
	s.equal(int64(len(x)), sum, finite)
}

// equal accumulates n elements equal on both sides, finite of them finite
// with squares summing to sum.
func (s *acc) equal(n int64, sum float64, finite int64) {
	s.n += n
	s.sumA2 += sum
	s.sumB2 += sum
	s.sumAB += sum
	s.finite += finite
	s.zero += finite
}
