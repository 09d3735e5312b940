package ggml

import (
	"encoding/binary"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// CanQuantize reports whether Quantize supports t.
func CanQuantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, TQ1_0, TQ2_0, MXFP4, IQ4_NL, IQ4_XS:
		return true
	}
	return false
}

// Quantize encodes the elements of src as type t into dst, which must be
// exactly t.RowBytes(len(src)) long. The bytes are those of ggml's
// reference quantizers (quantize_row_*_ref, GGML_FP32_TO_FP16,
// GGML_FP32_TO_BF16) bit for bit, for finite input. (Inputs with
// infinities or NaNs give what ggml gives on x86-64, where its C is
// undefined.) CanQuantize lists the supported types; others fail with
// ErrUnsupported.
func Quantize(t Type, src []float32, dst []byte) error {
	if err := check("quantize", t, len(dst), len(src)); err != nil {
		return err
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		quantF16(src, dst)
	case BF16:
		dst = dst[:2*len(src)]
		for i, v := range src {
			h := dtype.F32ToBF16Quiet(v)
			dst[2*i], dst[2*i+1] = byte(h), byte(h>>8)
		}
	case Q4_0:
		quantQ4_0(src, dst)
	case Q4_1:
		quantQ4_1(src, dst)
	case Q5_0:
		quantQ5_0(src, dst)
	case Q5_1:
		quantQ5_1(src, dst)
	case Q8_0:
		quantQ8_0(src, dst)
	case Q8_1:
		quantQ8_1(src, dst)
	case Q2_K:
		quantQ2_K(src, dst)
	case Q3_K:
		quantQ3_K(src, dst)
	case Q4_K:
		quantQ4_K(src, dst)
	case Q5_K:
		quantQ5_K(src, dst)
	case Q6_K:
		quantQ6_K(src, dst)
	case Q8_K:
		quantQ8_K(src, dst)
	case TQ1_0:
		quantTQ1_0(src, dst)
	case TQ2_0:
		quantTQ2_0(src, dst)
	case MXFP4:
		quantMXFP4(src, dst)
	case IQ4_NL:
		quantIQ4_NL(src, dst)
	case IQ4_XS:
		quantIQ4_XS(src, dst)
	default:
		return &TypeError{Op: "quantize", Type: t, Err: ErrUnsupported}
	}
	return nil
}

// QuantizeBigEndian is Quantize for a big-endian file: F32, F16 and BF16
// only.
func QuantizeBigEndian(t Type, src []float32, dst []byte) error {
	if err := check("quantize big-endian", t, len(dst), len(src)); err != nil {
		return err
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.BigEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.BigEndian.PutUint16(dst[2*i:], dtype.F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.BigEndian.PutUint16(dst[2*i:], dtype.F32ToBF16Quiet(v))
		}
	default:
		return &TypeError{Op: "quantize big-endian", Type: t, Err: ErrUnsupported}
	}
	return nil
}

// cvtt converts like a C float-to-int cast compiles on x86-64
// (CVTTSS2SI): truncation toward zero, and math.MinInt32 for NaN and
// values out of range, where C is undefined.
func cvtt(f float32) int32 {
	if f > -2147483904 && f < 2147483648 {
		return int32(f)
	}
	return math.MinInt32
}

// roundAway is C's (int)roundf(f): nearest, ties away from zero, with
// cvtt's result for NaN and out-of-range values.
func roundAway(f float32) int32 {
	if !(f > -2147483648 && f < 2147483648) {
		return math.MinInt32
	}
	t := int32(f)
	r := f - float32(t) // exact
	if r >= 0.5 {
		t++
	} else if r <= -0.5 {
		t--
	}
	return t
}

// roundSmall is roundAway for |f| < 2^23: adding the float32 just below
// 0.5 and truncating rounds half away from zero exactly in that range
// (checked for every float32 there).
func roundSmall(f float32) int32 {
	h := math.Float32frombits(0x3effffff | math.Float32bits(f)&(1<<31))
	return int32(f + h)
}

// nearestInt is ggml's nearest_int: round to nearest even through the
// float32 adder, exact for |f| <= 4194303 (ggml asserts that bound in
// debug builds; release builds, and this function, just return the bits).
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func putHalf(b []byte, f float32) {
	h := dtype.F32ToF16(f)
	b[0], b[1] = byte(h), byte(h>>8)
}

// absMax returns ggml's (amax, max) of a block: the largest magnitude
// and the first value having it.
func absMax(x []float32) (amax, max float32) {
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return amax, max
}

func quantQ4_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[18*i : 18*i+18 : 18*i+18]
		_, max := absMax(x)
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, d)
		qs := y[2:18:18]
		if id > -math.MaxFloat32 && id < math.MaxFloat32 {
			// |x*id| <= 8 (plus rounding): plain truncation is cvtt.
			for j := 0; j < 16; j++ {
				x0 := min(15, int32(float32(x[j]*id)+8.5))
				x1 := min(15, int32(float32(x[j+16]*id)+8.5))
				qs[j] = uint8(x0) | uint8(x1)<<4
			}
			continue
		}
		for j := 0; j < 16; j++ {
			x0 := min(15, int32(int8(cvtt(float32(x[j]*id)+8.5))))
			x1 := min(15, int32(int8(cvtt(float32(x[j+16]*id)+8.5))))
			qs[j] = uint8(x0) | uint8(x1)<<4
		}
	}
}

func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantQ4_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[20*i : 20*i+20 : 20*i+20]
		lo, hi := minMax(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, d)
		putHalf(y[2:], lo)
		qs := y[4:20]
		for j := 0; j < 16; j++ {
			x0 := min(15, int32(int8(cvtt(float32((x[j]-lo)*id)+0.5))))
			x1 := min(15, int32(int8(cvtt(float32((x[j+16]-lo)*id)+0.5))))
			qs[j] = uint8(x0) | uint8(x1)<<4
		}
	}
}

func quantQ5_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[22*i : 22*i+22 : 22*i+22]
		_, max := absMax(x)
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, d)
		var qh uint32
		qs := y[6:22]
		for j := 0; j < 16; j++ {
			x0 := uint8(min(31, int32(int8(cvtt(float32(x[j]*id)+16.5)))))
			x1 := uint8(min(31, int32(int8(cvtt(float32(x[j+16]*id)+16.5)))))
			qs[j] = x0&0x0F | (x1&0x0F)<<4
			qh |= uint32(x0&0x10) >> 4 << j
			qh |= uint32(x1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(y[2:], qh)
	}
}

func quantQ5_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[24*i : 24*i+24 : 24*i+24]
		lo, hi := minMax(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, d)
		putHalf(y[2:], lo)
		var qh uint32
		qs := y[8:24]
		for j := 0; j < 16; j++ {
			x0 := uint8(cvtt(float32((x[j]-lo)*id) + 0.5))
			x1 := uint8(cvtt(float32((x[j+16]-lo)*id) + 0.5))
			qs[j] = x0&0x0F | (x1&0x0F)<<4
			qh |= uint32(x0&0x10) >> 4 << j
			qh |= uint32(x1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(y[4:], qh)
	}
}

func quantQ8_0(src []float32, dst []byte) {
	nb := len(src) / 32
	i := 0
	if useAsm && nb > 0 {
		_ = dst[34*nb-1]
		for {
			i += quantQ8SSE(&src[32*i], &dst[34*i], nb-i)
			if i == nb {
				return
			}
			// The kernel stopped before a block of the slow paths.
			quantQ8_0Block(src[32*i:32*i+32:32*i+32], dst[34*i:34*i+34:34*i+34])
			if i++; i == nb {
				return
			}
		}
	}
	for ; i < nb; i++ {
		quantQ8_0Block(src[32*i:32*i+32:32*i+32], dst[34*i:34*i+34:34*i+34])
	}
}

// quantQ8_0Block quantizes one block of 32 (x) into its 34 bytes (y).
func quantQ8_0Block(x []float32, y []byte) {
	x, y = x[:32:32], y[:34:34]
	var amax float32
	for _, v := range x {
		if a := abs32(v); !(amax > a) {
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	putHalf(y, d)
	qs := y[2:34:34]
	if id > 0 && id <= math.MaxFloat32 {
		// |x*id| <= 127 (plus rounding): the fast exact rounding
		// applies.
		for j := range qs {
			qs[j] = uint8(roundSmall(x[j] * id))
		}
	} else {
		for j := range qs {
			qs[j] = uint8(roundAway(x[j] * id))
		}
	}
}

func quantQ8_K(src []float32, dst []byte) {
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[292*i : 292*i+292 : 292*i+292]
		amax, max := absMax(x)
		qs := y[4 : 4+QK_K]
		bsums := y[4+QK_K : 292]
		if amax == 0 {
			clear(y)
			continue
		}
		iscale := -127 / max
		for j := range qs {
			qs[j] = uint8(min(127, nearestInt(iscale*x[j])))
		}
		for j := 0; j < 16; j++ {
			var sum int32
			for _, q := range qs[16*j : 16*j+16] {
				sum += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(bsums[2*j:], uint16(sum))
		}
		binary.LittleEndian.PutUint32(y, math.Float32bits(1/iscale))
	}
}

// makeQKX2 is ggml's make_qkx2_quants: the scale and (negated) min of a
// group for an asymmetric quantization to [0, nmax], searching nstep+1
// candidate scales around the range, minimizing the weighted squared
// (or, with useMAD, absolute) error. L receives the levels.
func makeQKX2(nmax int32, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	weights = weights[:n]
	L, Laux = L[:n], Laux[:n]
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestError float32
	for i := range x {
		l := nearestInt(float32(iscale * (x[i] - lo)))
		l = max(0, min(nmax, l))
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+lo) - x[i]
		if useMAD {
			diff = abs32(diff)
		} else {
			diff = float32(diff * diff)
		}
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := range x {
			l := nearestInt(float32(iscale * (x[i] - lo)))
			l = max(0, min(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			wl := float32(w * float32(l))
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := range x {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i]
				if useMAD {
					diff = abs32(diff)
				} else {
					diff = float32(diff * diff)
				}
				curError += float32(weights[i] * diff)
			}
			if curError < bestError {
				copy(L, Laux)
				bestError = curError
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

// quantKX quantizes one super-block of Q4_K (nmax 15) or Q5_K (nmax 31):
// eight groups of 32 with 6-bit scales and mins, into scales (12 bytes)
// and L; it returns d and dmin as fp16.
func quantKX(x []float32, nmax int32, rmin float32, nstep int, scales []byte, L *[QK_K]uint8) (d, dmin uint16) {
	var weights [32]float32
	var Laux [32]uint8
	var mins, scs [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32 : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scs[j], mins[j] = makeQKX2(nmax, xs, weights[:], L[32*j:32*j+32], Laux[:], rmin, 0.1, nstep, false)
		if scs[j] > maxScale {
			maxScale = scs[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	scales = scales[:12]
	for j := 0; j < 8; j++ {
		ls := min(63, uint8(nearestInt(invScale*scs[j])))
		lm := min(63, uint8(nearestInt(invMin*mins[j])))
		if j < 4 {
			scales[j] = ls
			scales[j+4] = lm
		} else {
			scales[j+4] = ls&0xF | (lm&0xF)<<4
			scales[j-4] |= (ls >> 4) << 6
			scales[j] |= (lm >> 4) << 6
		}
	}
	hd, hm := dtype.F32ToF16(maxScale/63), dtype.F32ToF16(maxMin/63)
	dd, dm := dtype.F16ToF32(hd), dtype.F16ToF32(hm)
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, scales)
		d := dd * float32(sc)
		if d == 0 {
			continue
		}
		dmj := dm * float32(m)
		for ii := 0; ii < 32; ii++ {
			l := nearestInt((x[32*j+ii] + dmj) / d)
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
	return hd, hm
}

func quantQ4_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[144*i : 144*i+144 : 144*i+144]
		clear(y[4:16])
		hd, hm := quantKX(x, 15, -1, 20, y[4:16], &L)
		binary.LittleEndian.PutUint16(y[0:], hd)
		binary.LittleEndian.PutUint16(y[2:], hm)
		for j := 0; j < 4; j++ {
			q := y[16+32*j : 16+32*j+32 : 16+32*j+32]
			lo := L[64*j : 64*j+32 : 64*j+32]
			hi := L[64*j+32 : 64*j+64 : 64*j+64]
			for l := range q {
				q[l] = lo[l] | hi[l]<<4
			}
		}
	}
}

func quantQ5_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[176*i : 176*i+176 : 176*i+176]
		clear(y[4:48])
		hd, hm := quantKX(x, 31, -0.5, 15, y[4:16], &L)
		binary.LittleEndian.PutUint16(y[0:], hd)
		binary.LittleEndian.PutUint16(y[2:], hm)
		qh := y[16:48]
		m1, m2 := uint8(1), uint8(2)
		for n := 0; n < 4; n++ {
			ql := y[48+32*n : 48+32*n+32 : 48+32*n+32]
			for j := 0; j < 32; j++ {
				l1, l2 := L[64*n+j], L[64*n+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
		}
	}
}

// groupMaxEps is ggml's GROUP_MAX_EPS.
const groupMaxEps = 1e-15

// makeQX1 is ggml's make_qx_quants with rmse_type 1 and no weights: a
// symmetric scale for levels in [-nmax, nmax), refined over 18 candidate
// scales by weighted (x²) least squares. L receives level+nmax.
func makeQX1(nmax int32, x []float32, L []int8) float32 {
	n := len(x)
	if n > 16 {
		panic("ggml: makeQX1 group too large")
	}
	L = L[:n]
	amax, max := absMax(x)
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	// The weights w = x² and w*x are the same values in every pass.
	var wA, wxA [16]float32
	w, wx := wA[:n], wxA[:n]
	for i, v := range x {
		w[i] = float32(v * v)
		wx[i] = float32(w[i] * v)
	}
	fn := float32(nmax)
	iscale := float32(-nmax) / max
	var sumLX, sumL2 float32
	for i, v := range x {
		l := nearestInt(iscale * v)
		l = maxI(-nmax, minI(nmax-1, l))
		L[i] = int8(l + nmax)
		fl := float32(l)
		sumLX += float32(wx[i] * fl)
		sumL2 += float32(float32(w[i]*fl) * fl)
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fn + float32(0.1*float32(is))) / max
		sumLX, sumL2 = 0, 0
		for i, v := range x {
			l := nearestInt(iscale * v)
			l = maxI(-nmax, minI(nmax-1, l))
			fl := float32(l)
			sumLX += float32(wx[i] * fl)
			sumL2 += float32(float32(w[i]*fl) * fl)
		}
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			for i, v := range x {
				l := nearestInt(iscale * v)
				L[i] = int8(nmax + maxI(-nmax, minI(nmax-1, l)))
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

func minI(a, b int32) int32 { return min(a, b) }
func maxI(a, b int32) int32 { return max(a, b) }

func quantQ6_K(src []float32, dst []byte) {
	var L [QK_K]int8
	var scales [16]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[210*i : 210*i+210 : 210*i+210]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < 16; ib++ {
			s := makeQX1(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(y)
			continue
		}
		iscale := -128 / maxScale
		hd := dtype.F32ToF16(1 / iscale)
		binary.LittleEndian.PutUint16(y[208:], hd)
		sc := y[192:208]
		for ib := range sc {
			sc[ib] = uint8(min(127, nearestInt(iscale*scales[ib])))
		}
		dd := dtype.F16ToF32(hd)
		for j := 0; j < 16; j++ {
			d := dd * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
			}
		}
		for n := 0; n < 2; n++ {
			ql := y[64*n : 64*n+64 : 64*n+64]
			qh := y[128+32*n : 128+32*n+32 : 128+32*n+32]
			Ln := L[128*n : 128*n+128 : 128*n+128]
			for l := 0; l < 32; l++ {
				a, b, c, e := uint8(Ln[l]), uint8(Ln[l+32]), uint8(Ln[l+64]), uint8(Ln[l+96])
				ql[l] = a&0xF | (c&0xF)<<4
				ql[l+32] = b&0xF | (e&0xF)<<4
				qh[l] = a>>4 | (b>>4)<<2 | (c>>4)<<4 | (e>>4)<<6
			}
		}
	}
}

// quantF16 is F32ToF16 over a slice, its body repeated here so that the
// loop has no call.
func quantF16(src []float32, dst []byte) {
	dst = dst[:2*len(src)]
	for i, f := range src {
		w := math.Float32bits(f)
		shl1 := w + w
		base := float32(float32(math.Float32frombits(w&^0x80000000)*0x1p112) * 0x1p-110)
		bias := max(shl1&0xFF000000, 0x71000000)
		bits := math.Float32bits(float32(math.Float32frombits(bias>>1+0x07800000) + base))
		h := (w&0x80000000)>>16 | (bits>>13)&0x7C00 + bits&0x0FFF
		if shl1 > 0xFF000000 {
			h = (w&0x80000000)>>16 | 0x7E00
		}
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(h))
	}
}

func quantQ8_1(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[36*i : 36*i+36 : 36*i+36]
		amax := maxAbs(x)
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putHalf(y, d)
		qs := y[4:36]
		var sum int32
		for j := 0; j < 32; j++ {
			q := int8(roundAway(x[j] * id))
			qs[j] = uint8(q)
			sum += int32(q)
		}
		putHalf(y[2:], float32(sum)*d)
	}
}
