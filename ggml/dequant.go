package ggml

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Dequantize decodes len(dst) elements of type t from src into dst.
// src must hold exactly the blocks of those elements (t.RowBytes of
// len(dst)), in ggml's little-endian block layout. The result is bit for
// bit what ggml's reference C (dequantize_row_*, GGML_FP16_TO_FP32,
// GGML_BF16_TO_FP32) produces, for any input bytes, NaN and infinite
// scales included; the integer and F64 types are converted with float32
// rounding to nearest even. Use Validate to refuse non-finite data.
//
// Q8_1 has no dequantizer in ggml; here it decodes as qs[i]*d, ignoring
// the stored sum.
func Dequantize(t Type, src []byte, dst []float32) error {
	if err := check("dequantize", t, len(src), len(dst)); err != nil {
		return err
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		deqF16(src, dst, false)
	case BF16:
		deqBF16(src, dst, false)
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case I8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case I16:
		for i := range dst {
			dst[i] = float32(int16(binary.LittleEndian.Uint16(src[2*i:])))
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(binary.LittleEndian.Uint32(src[4*i:])))
		}
	case I64:
		for i := range dst {
			dst[i] = float32(int64(binary.LittleEndian.Uint64(src[8*i:])))
		}
	case Q4_0:
		deqQ4_0(src, dst)
	case Q4_1:
		deqQ4_1(src, dst)
	case Q5_0:
		deqQ5_0(src, dst)
	case Q5_1:
		deqQ5_1(src, dst)
	case Q8_0:
		deqQ8_0(src, dst, 34)
	case Q8_1:
		deqQ8_0(src, dst, 36)
	case Q2_K:
		deqQ2_K(src, dst)
	case Q3_K:
		deqQ3_K(src, dst)
	case Q4_K:
		deqQ4_K(src, dst)
	case Q5_K:
		deqQ5_K(src, dst)
	case Q6_K:
		deqQ6_K(src, dst)
	case Q8_K:
		deqQ8_K(src, dst)
	case IQ2_XXS:
		deqIQ2_XXS(src, dst)
	case IQ2_XS:
		deqIQ2_XS(src, dst)
	case IQ2_S:
		deqIQ2_S(src, dst)
	case IQ3_XXS:
		deqIQ3_XXS(src, dst)
	case IQ3_S:
		deqIQ3_S(src, dst)
	case IQ1_S:
		deqIQ1_S(src, dst)
	case IQ1_M:
		deqIQ1_M(src, dst)
	case IQ4_NL:
		deqIQ4_NL(src, dst)
	case IQ4_XS:
		deqIQ4_XS(src, dst)
	case TQ1_0:
		deqTQ1_0(src, dst)
	case TQ2_0:
		deqTQ2_0(src, dst)
	case MXFP4:
		deqMXFP4(src, dst)
	default:
		return &TypeError{Op: "dequantize", Type: t, Err: ErrUnsupported}
	}
	return nil
}

// DequantizeBigEndian is Dequantize for data stored big-endian (a
// big-endian GGUF file). Only the plain types (F32, F16, BF16, F64, I8,
// I16, I32, I64) have a big-endian layout; block types fail with
// ErrUnsupported.
func DequantizeBigEndian(t Type, src []byte, dst []float32) error {
	if err := check("dequantize big-endian", t, len(src), len(dst)); err != nil {
		return err
	}
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.BigEndian.Uint32(src[4*i:]))
		}
	case F16:
		deqF16(src, dst, true)
	case BF16:
		deqBF16(src, dst, true)
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.BigEndian.Uint64(src[8*i:])))
		}
	case I8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case I16:
		for i := range dst {
			dst[i] = float32(int16(binary.BigEndian.Uint16(src[2*i:])))
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(binary.BigEndian.Uint32(src[4*i:])))
		}
	case I64:
		for i := range dst {
			dst[i] = float32(int64(binary.BigEndian.Uint64(src[8*i:])))
		}
	default:
		return &TypeError{Op: "dequantize big-endian", Type: t, Err: ErrUnsupported}
	}
	return nil
}

func deqF16(src []byte, dst []float32, big bool) {
	src = src[:2*len(dst)]
	if big {
		for i := range dst {
			dst[i] = dtype.F16ToF32(binary.BigEndian.Uint16(src[2*i:]))
		}
		return
	}
	if len(dst) >= 1<<16 {
		// Long rows: a table of all 65536 values (256 KiB, built once)
		// beats the arithmetic.
		t := f16Table()
		for i := range dst {
			dst[i] = t[binary.LittleEndian.Uint16(src[2*i:])]
		}
		return
	}
	for i := range dst {
		dst[i] = dtype.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = dtype.F16ToF32(uint16(i))
	}
	return t
})

func deqBF16(src []byte, dst []float32, big bool) {
	src = src[:2*len(dst)]
	for i := range dst {
		b := src[2*i : 2*i+2 : 2*i+2]
		h := uint32(b[0]) | uint32(b[1])<<8
		if big {
			h = uint32(b[1]) | uint32(b[0])<<8
		}
		dst[i] = math.Float32frombits(h << 16)
	}
}

func deqQ4_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := src[18*i : 18*i+18 : 18*i+18]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d := half(b)
		qs := b[2:18]
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(qs[j]&0xF)-8) * d
			y[j+16] = float32(int32(qs[j]>>4)-8) * d
		}
	}
}

func deqQ4_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := src[20*i : 20*i+20 : 20*i+20]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d, m := half(b), half(b[2:])
		qs := b[4:20]
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(qs[j]&0xF)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

func deqQ5_0(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := src[22*i : 22*i+22 : 22*i+22]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d := half(b)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:22]
		for j := 0; j < 16; j++ {
			h0 := (qh >> j << 4) & 0x10
			h1 := (qh >> (j + 12)) & 0x10
			y[j] = float32(int32(uint32(qs[j]&0xF)|h0)-16) * d
			y[j+16] = float32(int32(uint32(qs[j]>>4)|h1)-16) * d
		}
	}
}

func deqQ5_1(src []byte, dst []float32) {
	for i := 0; i < len(dst)/32; i++ {
		b := src[24*i : 24*i+24 : 24*i+24]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d, m := half(b), half(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:24]
		for j := 0; j < 16; j++ {
			h0 := (qh >> j << 4) & 0x10
			h1 := (qh >> (j + 12)) & 0x10
			y[j] = float32(float32(uint32(qs[j]&0xF)|h0)*d) + m
			y[j+16] = float32(float32(uint32(qs[j]>>4)|h1)*d) + m
		}
	}
}

// asmChunk is the number of blocks the assembly kernels take per call.
const asmChunk = 64

// deqQ8_0 decodes Q8_0 (bs 34) and Q8_1 (bs 36: d, s, then the quants).
func deqQ8_0(src []byte, dst []float32, bs int) {
	nb := len(dst) / 32
	if useAsm && nb > 0 {
		_ = src[bs*nb-1]
		var scales [asmChunk]float32
		for i := 0; i < nb; i += asmChunk {
			k := min(asmChunk, nb-i)
			for j := 0; j < k; j++ {
				scales[j] = half(src[bs*(i+j):])
			}
			deqQ8SSE(&src[bs*i], &dst[32*i], &scales[0], k, bs)
		}
		return
	}
	for i := 0; i < nb; i++ {
		b := src[bs*i : bs*i+bs : bs*i+bs]
		y := dst[32*i : 32*i+32 : 32*i+32]
		d := half(b)
		qs := b[bs-32 : bs]
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(qs[j])) * d
		}
	}
}

func deqQ2_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[84*i : 84*i+84 : 84*i+84]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		scales := b[0:16]
		d, min := half(b[80:]), half(b[82:])
		is := 0
		for n := 0; n < 2; n++ {
			q := b[16+32*n : 16+32*n+32]
			yy := y[128*n : 128*n+128]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				for h := 0; h < 2; h++ {
					sc := scales[is]
					is++
					dl, ml := d*float32(sc&0xF), min*float32(sc>>4)
					qq := q[16*h : 16*h+16]
					out := yy[32*j+16*h : 32*j+16*h+16]
					for l := 0; l < 16; l++ {
						out[l] = float32(dl*float32((qq[l]>>shift)&3)) - ml
					}
				}
			}
		}
	}
}

// q3KScales unpacks the sixteen 6-bit Q3_K scales (minus 32).
func q3KScales(s []byte, out *[16]int8) {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(s[0:])
	a1 := binary.LittleEndian.Uint32(s[4:])
	tmp := binary.LittleEndian.Uint32(s[8:])
	var aux [4]uint32
	aux[2] = ((a0 >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
	aux[3] = ((a1 >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
	aux[0] = (a0 & kmask2) | (((tmp >> 0) & kmask1) << 4)
	aux[1] = (a1 & kmask2) | (((tmp >> 2) & kmask1) << 4)
	for k := 0; k < 16; k++ {
		out[k] = int8(aux[k/4]>>(8*(k%4))) - 32
	}
}

func deqQ3_K(src []byte, dst []float32) {
	var sc [16]int8
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[110*i : 110*i+110 : 110*i+110]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		hm := b[0:32]
		d := half(b[108:])
		q3KScales(b[96:108], &sc)
		is := 0
		m := uint8(1)
		for n := 0; n < 2; n++ {
			q := b[32+32*n : 32+32*n+32]
			for j := 0; j < 4; j++ {
				shift := uint(2 * j)
				for h := 0; h < 2; h++ {
					dl := d * float32(sc[is])
					is++
					out := y[128*n+32*j+16*h : 128*n+32*j+16*h+16]
					qq := q[16*h : 16*h+16]
					hh := hm[16*h : 16*h+16]
					for l := 0; l < 16; l++ {
						v := int32((qq[l] >> shift) & 3)
						if hh[l]&m == 0 {
							v -= 4
						}
						out[l] = dl * float32(v)
					}
				}
				m <<= 1
			}
		}
	}
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of Q4_K and Q5_K.
func scaleMinK4(j int, q []byte) (d, m uint8) {
	q = q[:12]
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xF) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

func deqQ4_K(src []byte, dst []float32) {
	nb := len(dst) / QK_K
	if useAsm && nb > 0 {
		_ = src[144*nb-1]
		var params [asmChunk * 16]float32
		for i := 0; i < nb; i += asmChunk {
			k := min(asmChunk, nb-i)
			for j := 0; j < k; j++ {
				b := src[144*(i+j) : 144*(i+j)+144 : 144*(i+j)+144]
				d, min := half(b), half(b[2:])
				p := params[16*j : 16*j+16 : 16*j+16]
				for g := 0; g < 4; g++ {
					sc, m := scaleMinK4(2*g, b[4:16])
					p[4*g], p[4*g+1] = d*float32(sc), min*float32(m)
					sc, m = scaleMinK4(2*g+1, b[4:16])
					p[4*g+2], p[4*g+3] = d*float32(sc), min*float32(m)
				}
			}
			deqQ4KSSE(&src[144*i], &dst[QK_K*i], &params[0], k)
		}
		return
	}
	for i := 0; i < nb; i++ {
		b := src[144*i : 144*i+144 : 144*i+144]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d, min := half(b), half(b[2:])
		scales := b[4:16]
		for j := 0; j < 4; j++ {
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), min*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), min*float32(m)
			// The 16 possible values of each half, computed as ggml
			// computes each element.
			var tlo, thi [16]float32
			for v := range tlo {
				tlo[v] = float32(d1*float32(v)) - m1
				thi[v] = float32(d2*float32(v)) - m2
			}
			q := b[16+32*j : 16+32*j+32 : 16+32*j+32]
			lo := y[64*j : 64*j+32 : 64*j+32]
			hi := y[64*j+32 : 64*j+64 : 64*j+64]
			for l := 0; l < 32; l++ {
				lo[l] = tlo[q[l]&0xF]
				hi[l] = thi[q[l]>>4]
			}
		}
	}
}

func deqQ5_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[176*i : 176*i+176 : 176*i+176]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d, min := half(b), half(b[2:])
		scales := b[4:16]
		qh := b[16:48]
		u1, u2 := uint8(1), uint8(2)
		for j := 0; j < 4; j++ {
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), min*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), min*float32(m)
			ql := b[48+32*j : 48+32*j+32 : 48+32*j+32]
			lo := y[64*j : 64*j+32 : 64*j+32]
			hi := y[64*j+32 : 64*j+64 : 64*j+64]
			for l := 0; l < 32; l++ {
				v1, v2 := ql[l]&0xF, ql[l]>>4
				if qh[l]&u1 != 0 {
					v1 += 16
				}
				if qh[l]&u2 != 0 {
					v2 += 16
				}
				lo[l] = float32(d1*float32(v1)) - m1
				hi[l] = float32(d2*float32(v2)) - m2
			}
			u1 <<= 2
			u2 <<= 2
		}
	}
}

func deqQ6_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[210*i : 210*i+210 : 210*i+210]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := half(b[208:])
		for n := 0; n < 2; n++ {
			ql := b[64*n : 64*n+64 : 64*n+64]
			qh := b[128+32*n : 128+32*n+32 : 128+32*n+32]
			sc := b[192+8*n : 192+8*n+8 : 192+8*n+8]
			yy := y[128*n : 128*n+128 : 128*n+128]
			for h := 0; h < 2; h++ {
				// The scale of l in [16h, 16h+16) for each of the four rows.
				s0 := d * float32(int8(sc[h]))
				s1 := d * float32(int8(sc[h+2]))
				s2 := d * float32(int8(sc[h+4]))
				s3 := d * float32(int8(sc[h+6]))
				for l := 16 * h; l < 16*h+16; l++ {
					q1 := int32(ql[l]&0xF|(qh[l]&3)<<4) - 32
					q2 := int32(ql[l+32]&0xF|((qh[l]>>2)&3)<<4) - 32
					q3 := int32(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
					q4 := int32(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
					yy[l] = s0 * float32(q1)
					yy[l+32] = s1 * float32(q2)
					yy[l+64] = s2 * float32(q3)
					yy[l+96] = s3 * float32(q4)
				}
			}
		}
	}
}

func deqQ8_K(src []byte, dst []float32) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[292*i : 292*i+292 : 292*i+292]
		y := dst[QK_K*i : QK_K*i+QK_K : QK_K*i+QK_K]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		qs := b[4 : 4+QK_K]
		for j := range y {
			y[j] = d * float32(int8(qs[j]))
		}
	}
}
