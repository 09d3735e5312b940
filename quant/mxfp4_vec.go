package quant

import (
	"github.com/ckpt-dev/ckpt/dtype"
)

// The vector path of gpt-oss MXFP4 to bfloat16 in the transformers
// layout (mxfp4_encode.go's encodeGroupPart, where the AVX-512 path
// (mxfp4_512.go) is not taken): a 32-element group of 16
// consecutive stored rows at a time, by mxfp4T16AVX2 (mxfp4_amd64.s).
// The bfloat16 of an E2M1 value times 2^(e-127) is the bfloat16 of the
// E2M1 value with e-127 added to its exponent field, exactly, as long
// as the product is a normal number: every nonzero E2M1 magnitude is in
// [0.5, 6], so for e in [2, 252] it is (2^-126 <= 0.5*2^(e-127),
// 6*2^(e-127) < 2^128), and zero stays zero. Rows whose scales fall
// outside (subnormal products, Inf, NaN) take the table path, which
// rounds them as dtype.F32ToBF16 does.

// mxfp4VecLo, mxfp4VecHi bound the E8M0 exponents the vector path takes.
const mxfp4VecLo, mxfp4VecHi = 2, 252

// mxfp4VecConsts are the kernel's constants (offsets fixed in the .s file).
type mxfp4VecConsts struct {
	c0f   [32]byte
	c7fff [16]uint16
	zero  [32]byte
	tabLo [32]byte // low bytes of the bfloat16 of each E2M1 code, twice
	tabHi [32]byte
}

var mxfp4Vec = func() *mxfp4VecConsts {
	k := &mxfp4VecConsts{}
	for i := range k.c0f {
		k.c0f[i] = 0x0f
	}
	for i := range k.c7fff {
		k.c7fff[i] = 0x7fff
	}
	for i := 0; i < 32; i++ {
		b := dtype.F32ToBF16(fp4E2M1[i%16])
		k.tabLo[i], k.tabHi[i] = byte(b), byte(b>>8)
	}
	return k
}()

// mxfp4VecAdj fills adj with the exponent adjustment (e-127)<<7 of each
// of 16 scales, at scales[0], scales[stride], ...; false when one is
// outside [mxfp4VecLo, mxfp4VecHi].
func mxfp4VecAdj(adj *[16]uint16, scales []byte, stride int) bool {
	for k := range adj {
		e := scales[k*stride]
		if e < mxfp4VecLo || e > mxfp4VecHi {
			return false
		}
		adj[k] = uint16(int16(int(e)-127) << 7)
	}
	return true
}

// mxfp4T16Go is mxfp4T16AVX2 one element at a time (the same bits; the
// tests hold the kernel to it and to the table): out row el (stride
// rowStride bytes) gets the 16 rows' element el.
func mxfp4T16Go(dst []byte, rowStride int, src []byte, srcStride int, adj *[16]uint16) {
	for k := 0; k < 16; k++ {
		blk := src[k*srcStride : k*srcStride+16]
		for el := 0; el < 32; el++ {
			code := blk[el/2] >> (4 * uint(el%2)) & 15
			v := dtype.F32ToBF16(fp4E2M1[code])
			if v&0x7fff != 0 {
				v += adj[k]
			}
			o := el*rowStride + 2*k
			dst[o], dst[o+1] = byte(v), byte(v>>8)
		}
	}
}
