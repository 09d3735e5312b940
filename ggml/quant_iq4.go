package ggml

import (
	"encoding/binary"

	"github.com/ckpt-dev/ckpt/dtype"
)

// bestIndexIQ4 is ggml's best_index_int8 over kvaluesIQ4NL: the index of
// the nearest value (the lower one on ties).
func bestIndexIQ4(x float32) uint8 {
	v := &kvaluesIQ4NL
	if x <= float32(v[0]) {
		return 0
	}
	if x >= float32(v[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(v[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(v[mu-1]) < float32(v[mu])-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// iq4Group is the per-32 step of ggml's quantize_row_iq4_nl_impl without
// importance weights: the scale of group xb (0 for a near-zero group, in
// which case Lb is left as it was) after 2*ntry+1 refinements.
func iq4Group(xb []float32, Lb []uint8, ntry int) float32 {
	xb, Lb = xb[:32], Lb[:32]
	var weight [32]float32
	for j, v := range xb {
		weight[j] = float32(v * v)
	}
	amax, max := absMax(xb)
	if amax < groupMaxEps {
		return 0
	}
	v0 := float32(kvaluesIQ4NL[0])
	var d float32
	if ntry > 0 {
		d = -max / v0
	} else {
		d = max / v0
	}
	id := 1 / d
	var sumQX, sumQ2 float32
	for j, x := range xb {
		l := bestIndexIQ4(id * x)
		Lb[j] = l
		q := float32(kvaluesIQ4NL[l])
		wq := float32(weight[j] * q)
		sumQX += float32(wq * x)
		sumQ2 += float32(wq * q)
	}
	d = sumQX / sumQ2
	best := d * sumQX
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(itry+int(kvaluesIQ4NL[0])) / max
		sumQX, sumQ2 = 0, 0
		for j, x := range xb {
			q := float32(kvaluesIQ4NL[bestIndexIQ4(id*x)])
			wq := float32(weight[j] * q)
			sumQX += float32(wq * x)
			sumQ2 += float32(wq * q)
		}
		if sumQ2 > 0 && float32(sumQX*sumQX) > float32(best*sumQ2) {
			d = sumQX / sumQ2
			best = d * sumQX
		}
	}
	return d
}

func packIQ4(q4 []byte, L []uint8) {
	for i := 0; i < len(q4)/16; i++ {
		for j := 0; j < 16; j++ {
			q4[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

// quantIQ4_NL is quantize_row_iq4_nl_ref. Like ggml it keeps the levels
// of the previous block for a block that is all (near) zero; its scale
// is 0, so they decode to zeros either way. (For a leading zero block
// ggml reads uninitialized memory; here the levels are 0.)
func quantIQ4_NL(src []float32, dst []byte) {
	var L [32]uint8
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32 : 32*i+32]
		y := dst[18*i : 18*i+18 : 18*i+18]
		d := iq4Group(x, L[:], -1)
		binary.LittleEndian.PutUint16(y, dtype.F32ToF16(d))
		packIQ4(y[2:18], L[:])
	}
}

// quantIQ4_XS is quantize_row_iq4_xs_ref.
func quantIQ4_XS(src []float32, dst []byte) {
	var L [QK_K]uint8
	var scales [8]float32
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		y := dst[136*i : 136*i+136 : 136*i+136]
		var maxScale, amaxScale float32
		for ib := 0; ib < 8; ib++ {
			scales[ib] = iq4Group(x[32*ib:32*ib+32], L[32*ib:32*ib+32], 7)
			if a := abs32(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		binary.LittleEndian.PutUint16(y, dtype.F32ToF16(d))
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sh uint16
		sl := y[4:8]
		for ib := 0; ib < 8; ib++ {
			l := max(-32, min(31, nearestInt(id*scales[ib])))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j, v := range x[32*ib : 32*ib+32] {
				L[32*ib+j] = bestIndexIQ4(idl * v)
			}
			l += 32
			if ib%2 == 0 {
				sl[ib/2] = uint8(l & 0xf)
			} else {
				sl[ib/2] |= uint8(l&0xf) << 4
			}
			sh |= uint16(l>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(y[2:], sh)
		packIQ4(y[8:136], L[:])
	}
}
