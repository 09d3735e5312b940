package quant

import "math"

// The row-segment decode of block FP8 (grid_encode.go's vecTo): one
// call takes every block of a row segment, each block's scale read from
// a float32 slice, so the per-block call of fp8Vec (128 codes a call in
// DeepSeek's layout) is paid once per row. With AVX-512 (VBMI for the
// byte lookups; fp8_512_amd64.s) 64 codes go through one step: their
// magnitudes look up the high and low bytes of their bfloat16 values
// (every e4m3fn and e5m2 value is a bfloat16 exactly, so these are the
// float32 values of the table path, f8Tables, without their zero low
// half) in two 128-entry byte tables (VPERMT2B), the code's sign goes
// into the high byte, the bytes are interleaved into float32s, multiplied
// by the block's scale, and rounded to bfloat16 (VCVTNEPS2BF16) or float16
// (VCVTPS2PH, nearest even) or stored as float32. The hardware's
// conversions round as dtype.F32ToBF16 and dtype.F32ToF16 do except on
// NaN (payloads, signs) and, for VCVTNEPS2BF16, float32 subnormals (it
// reads them as zero): a step whose products hold either (VFPCLASSPS) is
// left to fp8Vec, the AVX2 kernel and its portable twin, so every path
// gives the same bits.

// fp8Tab512 are the AVX-512 kernel's tables (offsets fixed in the .s file).
type fp8Tab512 struct {
	perm [64]byte  // 0: the codes' order that the byte interleaves restore
	lo   [128]byte // 64: bits 16-23 of each magnitude's float32 value
	hi   [128]byte // 192: bits 24-31
	sign [64]byte  // 320: 0x80
}

func newFP8Tab512(lut *[256]float32) *fp8Tab512 {
	t := &fp8Tab512{}
	// Step j of the kernel interleaves lane L's bytes 4j..4j+3 into lane
	// L of its j-th float32 vector; element 16j+4L+d must be there.
	for q := range t.perm {
		lane, j, d := q/16, q%16/4, q%4
		t.perm[q] = byte(16*j + 4*lane + d)
	}
	for m := 0; m < 128; m++ {
		b := math.Float32bits(lut[m])
		t.lo[m], t.hi[m] = byte(b>>16), byte(b>>24)
	}
	for i := range t.sign {
		t.sign[i] = 0x80
	}
	return t
}

// fp8Seg writes the products of row segment q: it starts off codes into
// its first block of bw codes, and block i of the segment (counted from
// that one) has scale scales[i].
func fp8Seg(k *fp8Consts, o fp8Out, out, q []byte, scales []float32, bw, off int) {
	es := o.size()
	if haveFP8Vec512 && len(q) >= 64 {
		sc, sbw, soff := scales, bw, off
		if off+len(q) <= bw { // one block: any length of it will do
			sbw, soff = len(q)&^63, 0
		}
		if sbw%64 == 0 && soff%64 == 0 {
			n := len(q) &^ 63
			for done := 0; done < n; {
				done += fp8Kernel512(o, out[es*done:], q[done:n], sc[(soff+done)/sbw:], sbw, (soff+done)%sbw, k.t512)
				if done < n { // a step with NaN or subnormal products
					fp8Vec(k, o, out[es*done:es*(done+64)], q[done:done+64], sc[(soff+done)/sbw])
					done += 64
				}
			}
			q, out, off = q[n:], out[es*n:], off+n
		}
	}
	for len(q) > 0 {
		blk := off / bw
		n := min(len(q), (blk+1)*bw-off)
		fp8Vec(k, o, out[:es*n], q[:n], scales[blk])
		q, out, off = q[n:], out[es*n:], off+n
	}
}
