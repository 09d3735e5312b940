package quant

import (
	"encoding/binary"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// The one-pass path of gpt-oss MXFP4 to bfloat16 or float16
// (DequantizeTo): an element's value depends only on its 4-bit code and
// its group's E8M0 byte, so a table of the 256 x 16 encoded products
// (fp4E2M1[code] * mxfp4Scales[e], rounded as dtype.EncodeFloat32
// rounds) gives each output element with one load. The transposed
// layout is written four stored rows at a time: one 8-byte store holds
// the same element of four consecutive stored rows, which are
// consecutive in an output row.

// mxfp4Table returns the table of dt's encoded products, built once.
func mxfp4Table(dt dtype.DType) *[256][16]uint16 {
	switch dt {
	case dtype.BFloat16:
		return mxfp4BF16()
	case dtype.Float16:
		return mxfp4F16()
	}
	return nil
}

var (
	mxfp4BF16 = sync.OnceValue(func() *[256][16]uint16 { return buildMXFP4Table(dtype.BFloat16) })
	mxfp4F16  = sync.OnceValue(func() *[256][16]uint16 { return buildMXFP4Table(dtype.Float16) })
)

func buildMXFP4Table(dt dtype.DType) *[256][16]uint16 {
	var t [256][16]uint16
	var v [16]float32
	var b [32]byte
	for e := range t {
		for n := range v {
			v[n] = fp4E2M1[n] * mxfp4Scales[e]
		}
		dtype.EncodeFloat32(dt, b[:], v[:])
		for n := range v {
			t[e][n] = binary.LittleEndian.Uint16(b[2*n:])
		}
	}
	return &t
}

// encodeTransposed writes elements [first, first+n) of the
// transformers-layout weight (TransformersShape flattened, counted from
// the first expert blocks and scales hold) into dst, 2 bytes each from
// tab; cols, when not nil, are the scales as columns (scaleColumns).
// The caller has checked the sizes.
func (l MXFP4Layout) encodeTransposed(dst []byte, tab *[256][16]uint16, blocks, scales, cols []byte, first, n int) {
	r := l.Prefix[1]
	e, end := first, first+n
	for e < end {
		t, i0 := e/r, e%r
		out := dst[2*(e-first):]
		if i0 != 0 || end-e < r { // part of a row
			i1 := min(r, i0+end-e)
			l.encodeRowPart(out, tab, blocks, scales, t, i0, i1)
			e += i1 - i0
			continue
		}
		k := t % l.Cols()
		// Whole groups of one expert by the AVX-512 path (mxfp4_512.go).
		if ng := min((end-e)/r/32, (l.Cols()-k)/32); ng > 0 && k%32 == 0 && r >= 32 && haveMXFP4Vec512 {
			if t512 := mxfp4Tab512For(tab); t512 != nil {
				l.encodeGroups512(out, tab, t512, blocks, scales, cols, t, ng)
				e += 32 * ng * r
				continue
			}
		}
		// Whole rows up to the end of their 32-element group.
		nr := min((end-e)/r, 32-k%32)
		l.encodeGroupRows(out, tab, blocks, scales, t, nr)
		e += nr * r
	}
}

// encodeRowPart writes elements [i0, i1) of output row t.
func (l MXFP4Layout) encodeRowPart(out []byte, tab *[256][16]uint16, blocks, scales []byte, t, i0, i1 int) {
	r, cols := l.Prefix[1], l.Cols()
	ex, k := t/cols, t%cols
	for i := i0; i < i1; i++ {
		gi := (ex*r+i)*l.Groups + k/32
		b := blocks[gi*16+k%32/2] >> (4 * (k % 2))
		binary.LittleEndian.PutUint16(out[2*(i-i0):], tab[scales[gi]][b&15])
	}
}

// encodeGroupRows writes nr whole output rows from row t, all within one
// 32-element group of the stored rows.
func (l MXFP4Layout) encodeGroupRows(out []byte, tab *[256][16]uint16, blocks, scales []byte, t, nr int) {
	l.encodeGroupPart(out[:2*nr*l.Prefix[1]], tab, blocks, scales, t, nr, 0, l.Prefix[1])
}

// encodeGroupPart writes stored rows [i0, i1) of the nr output rows from
// row t (all within one group): sixteen stored rows at a time by the
// AVX2 path (mxfp4_vec.go, bfloat16) for a whole group where their
// scales allow, else four at a time by the table.
func (l MXFP4Layout) encodeGroupPart(out []byte, tab *[256][16]uint16, blocks, scales []byte, t, nr, i0, i1 int) {
	r, cols := l.Prefix[1], l.Cols()
	ex, k := t/cols, t%cols
	g, j0 := k/32, k%32
	stride := l.Groups * 16 // bytes of one stored row
	vec := haveFP8Vec && nr == 32 && tab == mxfp4BF16()
	var adj [16]uint16
	i := i0
	for i+4 <= i1 {
		gi := (ex*r+i)*l.Groups + g
		if vec && i+16 <= i1 && mxfp4VecAdj(&adj, scales[gi:], l.Groups) {
			mxfp4T16AVX2(&out[2*i], 2*r, &blocks[gi*16], stride, &adj, mxfp4Vec)
			i += 16
			continue
		}
		l.encode4Rows(out, tab, blocks, scales, gi, i, j0, nr)
		i += 4
	}
	for ; i < i1; i++ {
		for j := 0; j < nr; j++ {
			l.encodeRowPart(out[2*(j*r+i):], tab, blocks, scales, t+j, i, i+1)
		}
	}
}

// encode4Rows writes stored rows i..i+3 (their group at gi) into the nr
// output rows of out, by the table.
func (l MXFP4Layout) encode4Rows(out []byte, tab *[256][16]uint16, blocks, scales []byte, gi, i, j0, nr int) {
	r := l.Prefix[1]
	le := binary.LittleEndian
	stride := l.Groups * 16
	b := blocks[gi*16 : gi*16+3*stride+16]
	t0, t1 := &tab[scales[gi]], &tab[scales[gi+l.Groups]]
	t2, t3 := &tab[scales[gi+2*l.Groups]], &tab[scales[gi+3*l.Groups]]
	// The 32 codes of a group are two 64-bit words, element el at
	// bit 4*(el%16) of word el/16.
	for half := 0; half < 2; half++ {
		lo, hi := max(j0, 16*half), min(j0+nr, 16*half+16)
		if lo >= hi {
			continue
		}
		w0, w1 := le.Uint64(b[8*half:]), le.Uint64(b[stride+8*half:])
		w2, w3 := le.Uint64(b[2*stride+8*half:]), le.Uint64(b[3*stride+8*half:])
		for el := lo; el < hi; el++ {
			sh := uint(el%16) * 4
			v := uint64(t0[w0>>sh&15]) | uint64(t1[w1>>sh&15])<<16 | uint64(t2[w2>>sh&15])<<32 | uint64(t3[w3>>sh&15])<<48
			le.PutUint64(out[2*((el-j0)*r+i):], v)
		}
	}
}
