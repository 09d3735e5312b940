package ggml

import (
	"encoding/binary"

	"github.com/ckpt-dev/ckpt/dtype"
)

// sign returns v negated when bit j of s is set. ggml writes a multiply
// by -1 or 1, which gcc compiles to a sign flip: the same for every
// number, and for a NaN it flips the sign bit too, as here.
func sign(v float32, s uint8, j int) float32 {
	if s>>j&1 != 0 {
		return -v
	}
	return v
}

func deqIQ2_XXS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[66*i : 66*i+66 : 66*i+66]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		for ib := 0; ib < 8; ib++ {
			q := b[2+8*ib : 2+8*ib+8]
			a1 := binary.LittleEndian.Uint32(q[4:])
			db := d * (0.5 + float32(a1>>28)) * 0.25
			for l := 0; l < 4; l++ {
				g := iq2xxsGrid[q[l]]
				s := ksignsIQ2XS[(a1>>(7*l))&127]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					out[j] = sign(db*float32(uint8(g>>(8*j))), s, j)
				}
			}
		}
	}
}

func deqIQ2_XS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[74*i : 74*i+74 : 74*i+74]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		qs := b[2:66]
		scales := b[66:74]
		for ib := 0; ib < 8; ib++ {
			db := [2]float32{
				d * (0.5 + float32(scales[ib]&0xf)) * 0.25,
				d * (0.5 + float32(scales[ib]>>4)) * 0.25,
			}
			for l := 0; l < 4; l++ {
				q := le16(qs[2*(4*ib+l):])
				g := iq2xsGrid[q&511]
				s := ksignsIQ2XS[q>>9]
				dl := db[l/2]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					out[j] = sign(dl*float32(uint8(g>>(8*j))), s, j)
				}
			}
		}
	}
}

func deqIQ2_S(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[82*i : 82*i+82 : 82*i+82]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		qs := b[2:34]
		signs := b[34:66]
		qh := b[66:74]
		scales := b[74:82]
		for ib := 0; ib < 8; ib++ {
			db := [2]float32{
				d * (0.5 + float32(scales[ib]&0xf)) * 0.25,
				d * (0.5 + float32(scales[ib]>>4)) * 0.25,
			}
			for l := 0; l < 4; l++ {
				dl := db[l/2]
				g := iq2sGrid[uint32(qs[4*ib+l])|(uint32(qh[ib])<<(8-2*l))&0x300]
				s := signs[4*ib+l]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					out[j] = sign(dl*float32(uint8(g>>(8*j))), s, j)
				}
			}
		}
	}
}

func deqIQ3_XXS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[98*i : 98*i+98 : 98*i+98]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		qs := b[2:66]
		ss := b[66:98]
		for ib := 0; ib < 8; ib++ {
			a := binary.LittleEndian.Uint32(ss[4*ib:])
			db := d * (0.5 + float32(a>>28)) * 0.5
			for l := 0; l < 4; l++ {
				s := ksignsIQ2XS[(a>>(7*l))&127]
				g1 := iq3xxsGrid[qs[8*ib+2*l]]
				g2 := iq3xxsGrid[qs[8*ib+2*l+1]]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 4; j++ {
					out[j] = sign(db*float32(uint8(g1>>(8*j))), s, j)
					out[j+4] = sign(db*float32(uint8(g2>>(8*j))), s, j+4)
				}
			}
		}
	}
}

func deqIQ3_S(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[110*i : 110*i+110 : 110*i+110]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		qs := b[2:66]
		qh := b[66:74]
		signs := b[74:106]
		scales := b[106:110]
		for ib := 0; ib < 8; ib++ {
			var db float32
			if ib%2 == 0 {
				db = d * float32(1+2*int32(scales[ib/2]&0xf))
			} else {
				db = d * float32(1+2*int32(scales[ib/2]>>4))
			}
			h := uint32(qh[ib])
			for l := 0; l < 4; l++ {
				g1 := iq3sGrid[uint32(qs[8*ib+2*l])|(h<<(8-2*l))&256]
				g2 := iq3sGrid[uint32(qs[8*ib+2*l+1])|(h<<(7-2*l))&256]
				s := signs[4*ib+l]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 4; j++ {
					out[j] = sign(db*float32(uint8(g1>>(8*j))), s, j)
					out[j+4] = sign(db*float32(uint8(g2>>(8*j))), s, j+4)
				}
			}
		}
	}
}

// iq1Delta is ggml's IQ1S_DELTA (and IQ1M_DELTA).
const iq1Delta = 0.125

func deqIQ1_S(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[50*i : 50*i+50 : 50*i+50]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		qs := b[2:34]
		qhb := b[34:50]
		for ib := 0; ib < 8; ib++ {
			qh := uint32(le16(qhb[2*ib:]))
			dl := d * float32(2*((qh>>12)&7)+1)
			delta := float32(iq1Delta)
			if qh&0x8000 != 0 {
				delta = -iq1Delta
			}
			for l := 0; l < 4; l++ {
				g := iq1sGrid[uint32(qs[4*ib+l])|((qh>>(3*l))&7)<<8]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					out[j] = dl * float32(float32(int8(g>>(8*j)))+delta)
				}
			}
		}
	}
}

func deqIQ1_M(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[56*i : 56*i+56 : 56*i+56]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		qs := b[0:32]
		qh := b[32:48]
		scb := b[48:56]
		sc := [4]uint16{le16(scb[0:]), le16(scb[2:]), le16(scb[4:]), le16(scb[6:])}
		d := dtype.F16ToF32(sc[0]>>12 | (sc[1]>>8)&0x00f0 | (sc[2]>>4)&0x0f00 | sc[3]&0xf000)
		for ib := 0; ib < 8; ib++ {
			s := sc[ib/2] >> (6 * (ib % 2))
			dl1 := d * float32(2*(s&7)+1)
			dl2 := d * float32(2*((s>>3)&7)+1)
			h0, h1 := uint16(qh[2*ib]), uint16(qh[2*ib+1])
			idx := [4]uint16{
				uint16(qs[4*ib]) | (h0<<8)&0x700,
				uint16(qs[4*ib+1]) | (h0<<4)&0x700,
				uint16(qs[4*ib+2]) | (h1<<8)&0x700,
				uint16(qs[4*ib+3]) | (h1<<4)&0x700,
			}
			hb := [4]uint16{h0 & 0x08, h0 & 0x80, h1 & 0x08, h1 & 0x80}
			for l := 0; l < 4; l++ {
				dl := dl1
				if l >= 2 {
					dl = dl2
				}
				delta := float32(iq1Delta)
				if hb[l] != 0 {
					delta = -iq1Delta
				}
				g := iq1sGrid[idx[l]]
				out := y[32*ib+8*l : 32*ib+8*l+8 : 32*ib+8*l+8]
				for j := 0; j < 8; j++ {
					out[j] = dl * float32(float32(int8(g>>(8*j)))+delta)
				}
			}
		}
	}
}

func deqIQ4_NL(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := src[18*i : 18*i+18 : 18*i+18]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d := half(b)
		qs := b[2:18]
		for j := 0; j < 16; j++ {
			y[j] = d * float32(kvaluesIQ4NL[qs[j]&0xf])
			y[j+16] = d * float32(kvaluesIQ4NL[qs[j]>>4])
		}
	}
}

func deqIQ4_XS(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[136*i : 136*i+136 : 136*i+136]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b)
		sh := uint32(le16(b[2:]))
		sl := b[4:8]
		qs := b[8:136]
		for ib := 0; ib < 8; ib++ {
			ls := int32((sl[ib/2]>>(4*(ib%2)))&0xf) | int32((sh>>(2*ib))&3)<<4
			dl := d * float32(ls-32)
			q := qs[16*ib : 16*ib+16]
			out := y[32*ib : 32*ib+32 : 32*ib+32]
			for j := 0; j < 16; j++ {
				out[j] = dl * float32(kvaluesIQ4NL[q[j]&0xf])
				out[j+16] = dl * float32(kvaluesIQ4NL[q[j]>>4])
			}
		}
	}
}

// tern decodes the n-th base-3 digit (most significant first) of a
// TQ1_0 byte: 0, 1 or 2.
func tern(q uint8, pow uint8) int32 {
	v := q * pow // wraps, as in ggml
	return int32((uint16(v) * 3) >> 8)
}

var pow3 = [6]uint8{1, 3, 9, 27, 81, 243}

func deqTQ1_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[54*i : 54*i+54 : 54*i+54]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		qs := b[0:48]
		qh := b[48:52]
		d := half(b[52:])
		k := 0
		// 32 bytes x 5 digits, then 16 bytes x 5 digits, then 4 x 4.
		for n := 0; n < 5; n++ {
			for m := 0; m < 32; m++ {
				y[k] = float32(tern(qs[m], pow3[n])-1) * d
				k++
			}
		}
		for n := 0; n < 5; n++ {
			for m := 0; m < 16; m++ {
				y[k] = float32(tern(qs[32+m], pow3[n])-1) * d
				k++
			}
		}
		for n := 0; n < 4; n++ {
			for j := 0; j < 4; j++ {
				y[k] = float32(tern(qh[j], pow3[n])-1) * d
				k++
			}
		}
	}
}

func deqTQ2_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[66*i : 66*i+66 : 66*i+66]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b[64:])
		for j := 0; j < 2; j++ {
			for l := 0; l < 4; l++ {
				out := y[128*j+32*l : 128*j+32*l+32 : 128*j+32*l+32]
				for m := 0; m < 32; m++ {
					q := int32((b[32*j+m] >> (2 * l)) & 3)
					out[m] = float32(q-1) * d
				}
			}
		}
	}
}

func deqMXFP4(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := src[17*i : 17*i+17 : 17*i+17]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d := e8m0Half(b[0])
		qs := b[1:17]
		for j := 0; j < 16; j++ {
			y[j] = float32(kvaluesMXFP4[qs[j]&0x0F]) * d
			y[j+16] = float32(kvaluesMXFP4[qs[j]>>4]) * d
		}
	}
}
