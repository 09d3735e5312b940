package verify

import (
	"encoding/json"
	"math"
)

// Stat is a statistic that may be undefined or infinite (a relative error
// against zeros): its JSON form is null when not finite.
type Stat float64

// MarshalJSON writes a finite Stat as a number, any other as null.
func (s Stat) MarshalJSON() ([]byte, error) {
	f := float64(s)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// Histogram counts a tensor's element differences A-B by sign and binary
// order of magnitude: Neg[i] and Pos[i] count the differences d with
// 2^(Lo+i-1) <= |d| < 2^(Lo+i) (the first bin also every smaller
// non-zero |d|, the last every larger one), Zero the equal elements.
// Elements where A or B is NaN or infinite are not counted. Its size is
// bounded: at most HistogramBins bins a sign.
type Histogram struct {
	Lo   int     `json:"lo"`
	Zero int64   `json:"zero"`
	Neg  []int64 `json:"neg"`
	Pos  []int64 `json:"pos"`
}

// The binary exponents a Histogram covers, before trimming.
const (
	histLo        = -80 // bin 0: |d| < 2^-80
	histHi        = 40  // last bin: |d| >= 2^39
	HistogramBins = histHi - histLo
)

// acc accumulates one tensor pair's statistics over its elements.
type acc struct {
	n, differing, nanMis, infMis, over, finite int64
	maxAbs, maxRel                             float64
	// sumDS is the sum of d*(a+b), which is sumA2-sumB2 without the
	// cancellation of that subtraction: cosine's 1-cos keeps its digits.
	sumD2, sumA2, sumB2, sumDS float64
	neg, pos                   [HistogramBins]int64
	zero                       int64
}

// tolerance is a check's atol/rtol (acc.over counts the elements past
// it) when on.
type tolerance struct {
	on         bool
	atol, rtol float64
}

// add accumulates elements x[i], y[i] of A and B.
func (s *acc) add(x, y []float64, tol tolerance) {
	s.n += int64(len(x))
	for i, a := range x {
		b := y[i]
		if a == b {
			if math.IsInf(a, 0) {
				continue
			}
			s.sumA2 += a * a
			s.sumB2 += a * a
			s.finite++
			s.zero++
			continue
		}
		nanA, nanB := a != a, b != b
		if nanA || nanB {
			if nanA != nanB {
				s.nanMis++
				s.differing++
				if tol.on {
					s.over++
				}
			}
			continue
		}
		s.differing++
		if math.IsInf(a, 0) || math.IsInf(b, 0) {
			s.infMis++
			if tol.on {
				s.over++
			}
			continue
		}
		d := a - b
		ad := math.Abs(d)
		s.finite++
		s.sumD2 += d * d
		s.sumA2 += a * a
		s.sumB2 += b * b
		s.sumDS += d * (a + b)
		s.maxAbs = max(s.maxAbs, ad)
		if ab := math.Abs(b); ab > 0 {
			s.maxRel = max(s.maxRel, ad/ab)
		} else {
			s.maxRel = math.Inf(1)
		}
		if tol.on && ad > tol.atol+tol.rtol*math.Abs(b) {
			s.over++
		}
		// ad = f * 2^e with 0.5 <= f < 1 (math.Frexp's e, read from the
		// exponent bits: ad is normal or lands in bin 0 anyway).
		e := int(math.Float64bits(ad)>>52&0x7ff) - 1022
		i := min(max(e-histLo, 0), HistogramBins-1)
		if d < 0 {
			s.neg[i]++
		} else {
			s.pos[i]++
		}
	}
}

// addEqual accumulates elements whose bits are equal on both sides (of
// one dtype), x their values.
func (s *acc) addEqual(x []float64) {
	var sum float64
	var finite int64
	for _, a := range x {
		if a-a == 0 { // finite: NaN and infinities are left out
			sum += a * a
			finite++
		}
	}
	s.equal(int64(len(x)), sum, finite)
}

// merge adds o's accumulation to s.
func (s *acc) merge(o *acc) {
	s.n += o.n
	s.differing += o.differing
	s.nanMis += o.nanMis
	s.infMis += o.infMis
	s.over += o.over
	s.finite += o.finite
	s.maxAbs = max(s.maxAbs, o.maxAbs)
	s.maxRel = max(s.maxRel, o.maxRel)
	s.sumD2 += o.sumD2
	s.sumA2 += o.sumA2
	s.sumB2 += o.sumB2
	s.sumDS += o.sumDS
	s.zero += o.zero
	for i := range s.neg {
		s.neg[i] += o.neg[i]
		s.pos[i] += o.pos[i]
	}
}

// scale multiplies the counts and sums by r: each element stood for r
// (a dimension both sides broadcast).
func (s *acc) scale(r int64) {
	if r == 1 {
		return
	}
	s.n *= r
	s.differing *= r
	s.nanMis *= r
	s.infMis *= r
	s.over *= r
	s.finite *= r
	s.zero *= r
	f := float64(r)
	s.sumD2 *= f
	s.sumA2 *= f
	s.sumB2 *= f
	s.sumDS *= f
	for i := range s.neg {
		s.neg[i] *= r
		s.pos[i] *= r
	}
}

// rmse, cosine and relFrobenius are over the elements finite on both
// sides.
func (s *acc) rmse() float64 {
	if s.finite == 0 {
		return 0
	}
	return math.Sqrt(s.sumD2 / float64(s.finite))
}

// cosine is A.B / (||A|| ||B||) from the sums of d^2, a^2, b^2 and
// d*(a+b) (d = a-b): 1 - (sumD2 - (||A||-||B||)^2) / (2 ||A|| ||B||), with
// ||A||-||B|| = sumDS / (||A||+||B||). Its error is relative to
// sumD2/(2 ||A|| ||B||), the size of 1-cos itself when the tensors are not
// mostly a scaling of each other, so 1-cos keeps its digits near 1 (the
// quotient of A.B by the norms loses them: its error is relative to 1).
// 1 for two zero tensors, 0 when only one is zero, within [-1, 1].
func cosine(sumD2, sumA2, sumB2, sumDS float64) float64 {
	switch {
	case sumA2 == 0 && sumB2 == 0:
		return 1
	case sumA2 == 0 || sumB2 == 0:
		return 0
	}
	na, nb := math.Sqrt(sumA2), math.Sqrt(sumB2)
	g := sumDS / (na + nb)
	c := 1 - (sumD2-g*g)/(2*na*nb)
	return min(max(c, -1), 1)
}

// relFrobenius is ||A-B|| / ||B||: 0 for equal tensors, +Inf when B is
// zero and A is not.
func relFrobenius(sumD2, sumB2 float64) float64 {
	switch {
	case sumD2 == 0:
		return 0
	case sumB2 == 0:
		return math.Inf(1)
	}
	return math.Sqrt(sumD2) / math.Sqrt(sumB2)
}

// histogram returns the accumulated histogram trimmed to its non-empty
// bins (nil when no element was counted).
func (s *acc) histogram() *Histogram {
	lo, hi := HistogramBins, -1
	for i := range s.neg {
		if s.neg[i] != 0 || s.pos[i] != 0 {
			lo, hi = min(lo, i), max(hi, i)
		}
	}
	h := &Histogram{Zero: s.zero, Neg: []int64{}, Pos: []int64{}}
	if hi < 0 {
		if s.zero == 0 {
			return nil
		}
		return h
	}
	h.Lo = lo + histLo
	h.Neg = append(h.Neg, s.neg[lo:hi+1]...)
	h.Pos = append(h.Pos, s.pos[lo:hi+1]...)
	return h
}
