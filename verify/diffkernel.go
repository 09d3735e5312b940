package verify

import (
	"math"
	"unsafe"

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

// kernelLanes is how many float64 lanes the kernels' accumulators have
// (one AVX-512 register of float64s; the AVX2 kernel uses the first four);
// histCopies how many counts each histogram slot has (the AVX-512
// kernel's lanes in its even and odd blocks; the AVX2 kernel's in 0-3
// and 4-7), so that increments of one slot in a row do not wait on each
// other.
const (
	kernelLanes = 8
	histCopies  = 16
)

// The kernels' histogram slots: a difference d (a float64) counts in slot
// math.Float64bits(d)>>52, its sign and biased exponent. d == 0 lands in
// slot 0 or histNegZero (-0); any other difference of two float32 values
// is a multiple of 2^-149 and below 2^129, so its biased exponent is in
// [histELo, histEHi] (a normal float64): flush reads only those slots.
const (
	histSlots   = 4096
	histNegZero = 2048
	histELo     = 1023 - 149
	histEHi     = 1023 + 129
)

// f32Kernel is the state of the float32 statistics kernel (addF32) over a
// tensor: float64 accumulators in kernelLanes lanes (the vector kernels'
// registers, which they load and store around each call; the Go kernel
// uses lane 0), the constants they compare with, broadcast, and the
// histogram (histSlots slots of histCopies counts, the copies of a slot
// in two cache lines). The vector kernels read it by offset: its layout is
// fixed (diffkernel_amd64.s, diffkernel512_amd64.s).
type f32Kernel struct {
	sumD2, sumA2, sumB2, sumDS [kernelLanes]float64 // 0, 64, 128, 192
	maxAbs                     [kernelLanes]float64 // 256
	over                       [kernelLanes]int64   // 320
	relThr                     [kernelLanes]float64 // 384: maxRel*(1-relSlack)
	atol, rtol                 [kernelLanes]float64 // 448, 512: atol +Inf without a tolerance
	tolOn                      int64                // 576: 1 with a tolerance (atol finite)
	relThr32                   float32              // 584: maxRel rounded down to a float32 (the block kernel's)
	_                          [13]uint32
	hist                       [histSlots][histCopies]int64     // 640
	hist32                     [histSlots32][histCopies32]int64 // 524928: the block kernel's (diffkernel32.go)
	blk                        blockHist                        // 656000
	blkGo                      blockCounts

	maxRel float64
	finite int64 // finite pairs counted, equal ones included

	blockA, blockB [kernelLanes]float32 // a block left by the vector kernel, decoded
}

func (k *f32Kernel) setRel(r float64) {
	k.maxRel = r
	t := r * (1 - relSlack)
	if math.IsInf(r, 1) {
		t = r
	}
	k.relThr = broadcast(t)
	k.relThr32 = roundDown32(r)
}

func broadcast(x float64) [kernelLanes]float64 {
	return [kernelLanes]float64{x, x, x, x, x, x, x, x}
}

func (k *f32Kernel) setTol(tol tolerance) {
	a, r := math.Inf(1), 0.0
	if tol.on {
		a, r = tol.atol, tol.rtol
	}
	k.atol, k.rtol = broadcast(a), broadcast(r)
	k.tolOn = 0
	if tol.on {
		k.tolOn = 1
	}
}

// statsKernel is a vector statistics kernel (vecKernel): addF32Go for
// the finite pairs of n elements (a multiple of kernelLanes) from x and
// y, returning the index of the first block of kernelLanes it leaves to
// addF32Go (n when none).
type statsKernel func(x, y unsafe.Pointer, n int, k *f32Kernel) int

// addF32 is add for float32 values (the elements of x and y widened to
// float64 exactly): the same counts, maxima and histogram; the sums in
// float64 with the products exact (a float32 product fits a float64),
// summed in kernelLanes lanes per call and the lanes then added to s, so
// that each rounding error is relative to a partial sum of at most
// len(x)/kernelLanes terms.
func (s *acc) addF32(x, y []float32, tol tolerance, k *f32Kernel) {
	y = y[:len(x)]
	s.addPairs(len(x), tol, k, nil, vecKernel(dtype.Float32, dtype.Float32),
		unsafe.Pointer(unsafe.SliceData(x)), unsafe.Pointer(unsafe.SliceData(y)), 4, 4,
		func(i, j int) ([]float32, []float32) { return x[i:j], y[i:j] })
}

// addRaw is addF32 for n elements of da (float32-valued: exactF32) in ca
// against n of db in cb, as read: a vector kernel reads float32 and
// bfloat16 elements as they are, other dtypes are decoded into bufA and
// bufB (n elements each) first.
func (s *acc) addRaw(da, db dtype.DType, ca, cb []byte, n int, tol tolerance, k *f32Kernel, bufA, bufB []float32) {
	vec := vecKernel(da, db)
	if vec == nil || n == 0 {
		s.addF32(asFloat32(da, bufA[:n], ca), asFloat32(db, bufB[:n], cb), tol, k)
		return
	}
	sa, sb := da.Size(), db.Size()
	s.addPairs(n, tol, k, blockKernel(da, db, tol), vec, unsafe.Pointer(&ca[0]), unsafe.Pointer(&cb[0]), sa, sb,
		func(i, j int) ([]float32, []float32) {
			x, y := k.blockA[:j-i], k.blockB[:j-i]
			dtype.DecodeFloat32(da, x, ca[i*sa:j*sa])
			dtype.DecodeFloat32(db, y, cb[i*sb:j*sb])
			return x, y
		})
}

// addPairs runs the kernels over n pairs: the block kernel blk (nil for
// none) in steps of blockPairs, the vector kernel vec (nil for none) on
// the steps blk leaves and on its tail, from pa and pb (elements of sa
// and sb bytes), and addF32Go on the blocks vec leaves and on its tail,
// whose float32 values elems returns (elements [i, j), j-i <= kernelLanes
// with a vector kernel). A block left has a NaN or an infinity, or a
// possible new maximum relative error (or, for blk, a pair outside its
// exact range): addF32Go hands the NaN and infinite ones to add and
// divides only for a new maximum.
func (s *acc) addPairs(n int, tol tolerance, k *f32Kernel, blk, vec statsKernel, pa, pb unsafe.Pointer, sa, sb int,
	elems func(i, j int) (x, y []float32)) {
	k.setRel(s.maxRel)
	k.setTol(tol)
	nb := n
	if blk != nil {
		nb = n &^ (blockPairs - 1)
	}
	for i := 0; i < n; {
		j := n // without the block kernel, or its tail
		if blk != nil && i < nb {
			m := min(nb-i, blockPairs*blockMaxSteps/2)
			k.blockWindow(s, m/blockPairs)
			v := blk(unsafe.Add(pa, i*sa), unsafe.Add(pb, i*sb), m, k)
			k.readPend()
			k.finite += int64(v)
			k.blkGo.taken += int64(v)
			k.blkGo.steps += v / blockPairs
			i += v
			if v < m {
				j = i + blockPairs // the step it left
			} else {
				j = i
			}
		}
		s.addVec(i, j, tol, k, vec, pa, pb, sa, sb, elems)
		i = j
	}
	s.n += int64(n)
	s.sumD2 += laneSum(&k.sumD2)
	s.sumA2 += laneSum(&k.sumA2)
	s.sumB2 += laneSum(&k.sumB2)
	s.sumDS += laneSum(&k.sumDS)
	for l := range kernelLanes {
		s.maxAbs = max(s.maxAbs, k.maxAbs[l])
		s.over += k.over[l]
	}
	k.maxAbs, k.over = [kernelLanes]float64{}, [kernelLanes]int64{}
	s.maxRel = k.maxRel
}

// addVec is addPairs's vector kernel and addF32Go over pairs [lo, hi).
func (s *acc) addVec(lo, hi int, tol tolerance, k *f32Kernel, vec statsKernel, pa, pb unsafe.Pointer, sa, sb int,
	elems func(i, j int) (x, y []float32)) {
	n4 := lo + (hi-lo)&^(kernelLanes-1)
	for i := lo; i < hi; {
		j := hi // without the vector kernel, or its tail
		if vec != nil && i < n4 {
			v := vec(unsafe.Add(pa, i*sa), unsafe.Add(pb, i*sb), n4-i, k) // finite pairs, all
			k.finite += int64(v)
			i += v
			if i < n4 {
				j = min(i+kernelLanes, hi) // the block it left (and the next, for a kernel of fewer lanes)
			}
		}
		if i < j {
			x, y := elems(i, j)
			s.addF32Go(x, y, tol, k)
		}
		i = j
	}
}

// laneSum returns the sum of the lanes of v and clears them.
func laneSum(v *[kernelLanes]float64) float64 {
	r := ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
	*v = [kernelLanes]float64{}
	return r
}

// addF32Go is the kernel in Go, element by element into lane 0: what the
// vector kernel does for finite pairs, and the rest (NaN, infinities, a
// new maximum relative error) that it leaves. It does not count s.n.
func (s *acc) addF32Go(x, y []float32, tol tolerance, k *f32Kernel) {
	y = y[:len(x)]
	sumD2, sumA2, sumB2, sumDS := k.sumD2[0], k.sumA2[0], k.sumB2[0], k.sumDS[0]
	maxAbs, maxRel, relThr := k.maxAbs[0], k.maxRel, k.relThr[0]
	atol, rtol := k.atol[0], k.rtol[0]
	over, finite := k.over[0], k.finite
	for i, xf := range x {
		a, b := float64(xf), float64(y[i])
		d := a - b
		if d-d != 0 { // a or b NaN or infinite
			s.add([]float64{a}, []float64{b}, tol)
			s.n-- // counted by addF32
			continue
		}
		finite++
		if d == 0 {
			aa := a * a
			sumA2 += aa
			sumB2 += aa
			k.hist[math.Float64bits(d)>>52][0]++
			continue
		}
		sumD2 += d * d
		sumA2 += a * a
		sumB2 += b * b
		sumDS += d * (a + b)
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
		if ad > atol+float64(rtol*ab) {
			over++
		}
		k.hist[math.Float64bits(d)>>52][0]++
	}
	k.sumD2[0], k.sumA2[0], k.sumB2[0], k.sumDS[0] = sumD2, sumA2, sumB2, sumDS
	k.maxAbs[0], k.over[0], k.finite = maxAbs, over, finite
	if maxRel != k.maxRel {
		k.setRel(maxRel)
	}
}

// flush adds k's counts and histogram to s and clears them: once a
// tensor, after its last addF32.
func (s *acc) flush(k *f32Kernel) {
	slot := func(i int) int64 { return sumClear(k.hist[i][:]) }
	zero := slot(0) + slot(histNegZero) + s.flush32(k)
	for e := histELo; e <= histEHi; e++ {
		bin := min(max(e-1022-histLo, 0), HistogramBins-1)
		s.pos[bin] += slot(e)
		s.neg[bin] += slot(histNegZero + e)
	}
	s.finite += k.finite
	s.zero += zero
	s.differing += k.finite - zero
	k.finite = 0
}

// addEqualF32 is addEqual for float32 values.
func (s *acc) addEqualF32(x []float32) {
	if len(x) == 0 {
		return
	}
	s.addEqualRaw(dtype.Float32, unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)), x)
}

// addEqualRaw is addEqual for the elements of d (float32-valued) in c,
// equal on both sides: a vector kernel reads float32 and bfloat16
// elements as they are, the rest (all of them for other dtypes) is decoded
// into buf (room for len(c)/d.Size() elements).
func (s *acc) addEqualRaw(d dtype.DType, c []byte, buf []float32) {
	es := d.Size()
	n := len(c) / es
	sum, finite, i := sumSqVec(d, c)
	for _, f := range asFloat32(d, buf[:n-i], c[i*es:]) {
		a := float64(f)
		if a-a == 0 {
			sum += a * a
			finite++
		}
	}
	s.equal(int64(n), sum, finite)
}

// equal accumulates n elements equal on both sides, finite of them finite
// with squares summing to sum.
func (s *acc) equal(n int64, sum float64, finite int64) {
	s.n += n
	s.sumA2 += sum
	s.sumB2 += sum
	s.finite += finite
	s.zero += finite
}

// float32s returns b (little-endian float32 elements, 4-byte aligned as
// Go's allocations are) as float32s without copying, on a little-endian
// host; nil elsewhere.
func float32s(b []byte) []float32 {
	if !littleEndian || len(b) < 4 || uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// asFloat32 returns src's elements of d as float32s: a float32 tensor's
// bytes as they are where the host allows (float32s), else decoded into
// dst.
func asFloat32(d dtype.DType, dst []float32, src []byte) []float32 {
	if d == dtype.Float32 {
		if f := float32s(src); f != nil {
			return f
		}
	}
	dtype.DecodeFloat32(d, dst, src)
	return dst
}

// sumClear returns the sum of c's counts and clears them.
func sumClear(c []int64) int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	clear(c)
	return n
}
