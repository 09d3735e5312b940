package ggml

import (
	"encoding/binary"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

func quantQ2_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	var Laux [16]uint8
	var weights [16]float32
	var mins, scales [16]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[84*i : 84*i+84 : 84*i+84]
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			xs := x[16*j : 16*j+16 : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2(3, xs, weights[:], L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		sc := y[0:16]
		var hd, hm uint16
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range sc {
				sc[j] = uint8(nearestInt(iscale * scales[j]))
			}
			hd = dtype.F32ToF16(maxScale / 15)
		} else {
			clear(sc)
			hd = dtype.F32ToF16(0)
		}
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range sc {
				sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
			}
			hm = dtype.F32ToF16(maxMin / 15)
		} else {
			hm = dtype.F32ToF16(0)
		}
		binary.LittleEndian.PutUint16(y[80:], hd)
		binary.LittleEndian.PutUint16(y[82:], hm)
		dd, dm := dtype.F16ToF32(hd), dtype.F16ToF32(hm)
		for j := 0; j < 16; j++ {
			d := dd * float32(sc[j]&0xF)
			if d == 0 {
				continue
			}
			dmj := dm * float32(sc[j]>>4)
			for ii := 0; ii < 16; ii++ {
				l := nearestInt((x[16*j+ii] + dmj) / d)
				L[16*j+ii] = uint8(max(0, min(3, l)))
			}
		}
		packQ2(y[16:80], &L)
	}
}

// packQ2 stores 2-bit levels as Q2_K and Q3_K do: four rows of 32 per
// 128 elements, one per bit pair.
func packQ2(qs []byte, L *[QK_K]uint8) {
	for n := 0; n < 2; n++ {
		q := qs[32*n : 32*n+32 : 32*n+32]
		Ln := L[128*n : 128*n+128 : 128*n+128]
		for l := range q {
			q[l] = Ln[l] | Ln[l+32]<<2 | Ln[l+64]<<4 | Ln[l+96]<<6
		}
	}
}

// makeQ3 is ggml's make_q3_quants with do_rmse: symmetric levels in
// [-nmax, nmax) refined by coordinate descent on the x²-weighted error.
// L receives level+nmax.
func makeQ3(nmax int32, x []float32, L []uint8) float32 {
	n := len(x)
	L = L[:n]
	amax, max := absMax(x)
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	var Li [16]int32
	iscale := float32(-nmax) / max
	var sumLX, sumL2 float32
	for i, v := range x {
		l := nearestInt(iscale * v)
		l = maxI(-nmax, minI(nmax-1, l))
		Li[i] = l
		w := float32(v * v)
		fl := float32(l)
		sumLX += float32(float32(w*v) * fl)
		sumL2 += float32(float32(w*fl) * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := float32(v * v)
			fl := float32(Li[i])
			slx := sumLX - float32(float32(w*v)*fl)
			if slx > 0 {
				sl2 := sumL2 - float32(float32(w*fl)*fl)
				nl := nearestInt(float32(v*sl2) / slx)
				nl = maxI(-nmax, minI(nmax-1, nl))
				if nl != Li[i] {
					fn := float32(nl)
					slx += float32(float32(w*v) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*sumL2) > float32(float32(sumLX*sumLX)*sl2) {
						Li[i] = nl
						sumLX, sumL2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range L {
		L[i] = uint8(Li[i] + nmax)
	}
	if sumL2 > 0 {
		return sumLX / sumL2
	}
	return 0
}

func quantQ3_K(src []float32, dst []byte) {
	var L [QK_K]uint8
	var scales [16]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[110*i : 110*i+110 : 110*i+110]
		var maxScale, amax float32
		for j := 0; j < 16; j++ {
			scales[j] = makeQ3(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		sc := y[96:108]
		clear(sc)
		var hd uint16
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < 16; j++ {
				l := int32(int8(nearestInt(iscale * scales[j])))
				l = max(-32, min(31, l)) + 32
				if j < 8 {
					sc[j] = uint8(l & 0xF)
				} else {
					sc[j-8] |= uint8(l&0xF) << 4
				}
				l >>= 4
				sc[j%4+8] |= uint8(l << (2 * (j / 4)))
			}
			hd = dtype.F32ToF16(1 / iscale)
		} else {
			hd = dtype.F32ToF16(0)
		}
		binary.LittleEndian.PutUint16(y[108:], hd)
		dd := dtype.F16ToF32(hd)
		for j := 0; j < 16; j++ {
			var s uint8
			if j < 8 {
				s = sc[j] & 0xF
			} else {
				s = sc[j-8] >> 4
			}
			s8 := int8(s|((sc[8+j%4]>>(2*(j/4)))&3)<<4) - 32
			d := dd * float32(s8)
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = uint8(max(-4, min(3, l)) + 4)
			}
		}
		hm := y[0:32]
		clear(hm)
		for j := range L {
			if L[j] > 3 {
				hm[j%32] |= 1 << (j / 32)
				L[j] -= 4
			}
		}
		packQ2(y[32:96], &L)
	}
}

// lroundf is C's lroundf as glibc computes it on x86-64: nearest, ties
// away from zero, and math.MinInt64 for NaN and out-of-range values.
func lroundf(f float32) int64 {
	if a := abs32(f); a < 1<<23 {
		return int64(roundSmall(f))
	} else if a < 1<<63 {
		return int64(f)
	}
	return math.MinInt64
}

// maxAbs is ggml's MAX-macro absolute maximum (a NaN propagates when it
// comes last, as in the C).
func maxAbs(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := abs32(v); !(amax > a) {
			amax = a
		}
	}
	return amax
}

func quantTQ1_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[54*i : 54*i+54 : 54*i+54]
		d := maxAbs(x)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(y[52:], dtype.F32ToF16(d))
		trit := func(v float32) uint8 { return uint8(int32(lroundf(v*id) + 1)) }
		ceil := func(q uint8) uint8 { return uint8((uint32(q)*256 + 242) / 243) }
		// 32 bytes of 5 trits (stride 32), 16 bytes of 5 (stride 16),
		// 4 bytes of 4 (stride 4).
		for m := 0; m < 32; m++ {
			var q uint8
			for n := 0; n < 5; n++ {
				q = q*3 + trit(x[m+32*n])
			}
			y[m] = ceil(q)
		}
		for m := 0; m < 16; m++ {
			var q uint8
			for n := 0; n < 5; n++ {
				q = q*3 + trit(x[160+m+16*n])
			}
			y[32+m] = ceil(q)
		}
		for j := 0; j < 4; j++ {
			var q uint8
			for m := 0; m < 4; m++ {
				q = q*3 + trit(x[240+j+4*m])
			}
			y[48+j] = ceil(q * 3)
		}
	}
}

func quantTQ2_0(src []float32, dst []byte) {
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[66*i : 66*i+66 : 66*i+66]
		d := maxAbs(x)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(y[64:], dtype.F32ToF16(d))
		for j := 0; j < 2; j++ {
			for m := 0; m < 32; m++ {
				var q uint8
				for n := 0; n < 4; n++ {
					xi := int32(lroundf(x[128*j+m+32*n]*id) + 1)
					q += uint8((xi & 3) << (2 * n))
				}
				y[32*j+m] = q
			}
		}
	}
}

func quantMXFP4(src []float32, dst []byte) {
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[17*i : 17*i+17 : 17*i+17]
		amax, _ := absMax(x)
		var e uint8
		if amax > 0 {
			lg := float32(math.Log2(float64(amax)))
			e = uint8(cvtt(float32(float32(math.Floor(float64(lg)))-2) + 127))
		}
		d := e8m0Half(e)
		y[0] = e
		qs := y[1:17]
		for j := 0; j < 16; j++ {
			qs[j] = bestMXFP4(x[j], d) | bestMXFP4(x[j+16], d)<<4
		}
	}
}

func bestMXFP4(x, d float32) uint8 {
	best := 0
	bestErr := abs32(float32(float32(kvaluesMXFP4[0])*d) - x)
	for i := 1; i < 16; i++ {
		if err := abs32(float32(float32(kvaluesMXFP4[i])*d) - x); err < bestErr {
			best, bestErr = i, err
		}
	}
	return uint8(best)
}
