package quant

import (
	"encoding/binary"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// The AVX-512 path of gpt-oss MXFP4 to bfloat16 or float16 in the
// transformers layout (encodeGroups512): tiles of one 32-element group
// of 32 consecutive stored rows, each tile 32 output rows of 64 bytes,
// one call down all the stored rows of an expert for every group of the
// range (mxfp4T32AVX512, mxfp4_512_amd64.s: a tile's groups one after
// the other, while its rows' codes are in the cache). As on the AVX2 path (mxfp4_vec.go), an E2M1
// value times 2^(e-127) is the encoded E2M1 value with e-127 added to
// its exponent field, exactly, while the product is a normal number of
// the dtype: bfloat16 for e in [2, 252], float16 for e in [114, 140]
// (every nonzero E2M1 magnitude is in [0.5, 6]; float16's normals are
// [2^-14, 65504]). A tile with a scale outside goes to the table path.

// mxfp4Tab512 are the kernel's constants for one output dtype (offsets
// fixed in the .s file).
type mxfp4Tab512 struct {
	tab   [32]uint16 // the 16 encoded E2M1 values, twice
	c7fff [32]uint16
	lo    [32]uint16  // least exponent taken
	span  [32]uint16  // greatest minus least
	bias  [32]uint16  // 127
	mul   [32]uint16  // 1 << mantissa bits: the exponent field's unit
	perm1 [2][64]byte // 8 rows x 16 bytes to positions 0-7 and 8-15 x 8 rows
	permQ [2][8]uint64
	permO [2][8]uint64
}

// mxfp4VecBF16, mxfp4VecF16 are the kernel's constants for each dtype.
var (
	mxfp4VecBF16 = newMXFP4Tab512(dtype.BFloat16, 2, 252, 7)
	mxfp4VecF16  = newMXFP4Tab512(dtype.Float16, 114, 140, 10)
)

func newMXFP4Tab512(dt dtype.DType, lo, hi uint16, mant uint) *mxfp4Tab512 {
	t := &mxfp4Tab512{}
	for i := range t.tab {
		v := fp4E2M1[i%16]
		if dt == dtype.BFloat16 {
			t.tab[i] = dtype.F32ToBF16(v)
		} else {
			t.tab[i] = dtype.F32ToF16(v)
		}
		t.c7fff[i] = 0x7fff
		t.lo[i], t.span[i], t.bias[i], t.mul[i] = lo, hi-lo, 127, 1<<mant
	}
	// perm1[h] byte 8j+r takes byte 8h+j of row r: index 16r+8h+j of
	// the two registers holding rows 0-3 and 4-7.
	for h := 0; h < 2; h++ {
		for j := 0; j < 8; j++ {
			for r := 0; r < 8; r++ {
				t.perm1[h][8*j+r] = byte(16*r + 8*h + j)
			}
		}
	}
	// permQ[h] interleaves the positions 4h..4h+3 of two row octets;
	// permO[h] puts positions 2h, 2h+1 of four octets in order.
	t.permQ = [2][8]uint64{{0, 8, 1, 9, 2, 10, 3, 11}, {4, 12, 5, 13, 6, 14, 7, 15}}
	t.permO = [2][8]uint64{{0, 1, 8, 9, 2, 3, 10, 11}, {4, 5, 12, 13, 6, 7, 14, 15}}
	return t
}

// mxfp4Tab512For returns the kernel's constants for tab's dtype, nil
// for a table it does not write.
func mxfp4Tab512For(tab *[256][16]uint16) *mxfp4Tab512 {
	switch tab {
	case mxfp4BF16():
		return mxfp4VecBF16
	case mxfp4F16():
		return mxfp4VecF16
	}
	return nil
}

// mxfp4T32Go is mxfp4T32AVX512 one element at a time (the same bits and
// the same stop; the tests hold the kernel to it and both to the
// table): tile k, group gg writes output rows 32*gg+el, el = 0..31
// (rowStride bytes apart), 32 values from 64*k bytes on, from stored
// rows 32k..32k+31 (srcStride bytes apart, the group's 16 bytes from
// 16*gg) scaled by scales[gg*scaleStride+row] (the group's column of the
// scales); it stops before a tile holding a scale outside t's range.
func mxfp4T32Go(dst []byte, rowStride int, src []byte, srcStride int, scales []byte, scaleStride, ngroups, ntiles int, t *mxfp4Tab512) int {
	for k := 0; k < ntiles; k++ {
		for gg := 0; gg < ngroups; gg++ {
			var adj [32]uint16
			for i := range adj {
				e := uint16(scales[gg*scaleStride+32*k+i])
				if e-t.lo[0] > t.span[0] {
					return k
				}
				adj[i] = (e - t.bias[0]) * t.mul[0]
			}
			for i := 0; i < 32; i++ {
				blk := src[(32*k+i)*srcStride+16*gg:][:16]
				for el := 0; el < 32; el++ {
					v := t.tab[blk[el/2]>>(4*uint(el%2))&15]
					if v&0x7fff != 0 {
						v += adj[i]
					}
					o := (32*gg+el)*rowStride + 64*k + 2*i
					dst[o], dst[o+1] = byte(v), byte(v>>8)
				}
			}
		}
	}
	return ntiles
}

// mxfp4Cols holds the scale columns of encodeGroups512.
var mxfp4Cols = sync.Pool{New: func() any { return new([]byte) }}

// scaleColumns writes the scales ([Prefix..., Groups], experts of
// Prefix[1] rows) as columns: each expert's [rows, Groups] transposed to
// [Groups, rows], so that group g's scales of expert x are the rows
// bytes from (x*Groups+g)*rows, as encodeGroups512 reads them. Blocks of
// 8 rows x 8 groups go through eight 64-bit words (transpose8); the
// groups and rows left over one byte at a time.
func (l MXFP4Layout) scaleColumns(dst, scales []byte) {
	r, g := l.Prefix[len(l.Prefix)-1], l.Groups
	le := binary.LittleEndian
	for x := 0; x+r*g <= len(scales) && x+r*g <= len(dst); x += r * g {
		s, d := scales[x:x+r*g], dst[x:x+r*g]
		i0 := 0
		for ; i0+8 <= r; i0 += 8 {
			g0 := 0
			for ; g0+8 <= g; g0 += 8 {
				var w [8]uint64
				for k := range w {
					w[k] = le.Uint64(s[(i0+k)*g+g0:])
				}
				transpose8(&w)
				for j, v := range w {
					le.PutUint64(d[(g0+j)*r+i0:], v)
				}
			}
			for ; g0 < g; g0++ {
				for i := i0; i < i0+8; i++ {
					d[g0*r+i] = s[i*g+g0]
				}
			}
		}
		for ; i0 < r; i0++ {
			for gg := 0; gg < g; gg++ {
				d[gg*r+i0] = s[i0*g+gg]
			}
		}
	}
}

// transpose8 transposes the 8x8 bytes of w (byte j of w[i], little-endian,
// becomes byte i of w[j]): blocks of 4, 2, then 1 bytes exchanged across
// the diagonal.
func transpose8(w *[8]uint64) {
	for i := 0; i < 4; i++ {
		t := (w[i]>>32 ^ w[i+4]) & 0x00000000ffffffff
		w[i] ^= t << 32
		w[i+4] ^= t
	}
	for _, i := range [4]int{0, 1, 4, 5} {
		t := (w[i]>>16 ^ w[i+2]) & 0x0000ffff0000ffff
		w[i] ^= t << 16
		w[i+2] ^= t
	}
	for i := 0; i < 8; i += 2 {
		t := (w[i]>>8 ^ w[i+1]) & 0x00ff00ff00ff00ff
		w[i] ^= t << 8
		w[i+1] ^= t
	}
}

// encodeGroups512 writes the 32*ng output rows from row t (a multiple of
// 32; ng groups of one expert) by the AVX-512 kernel from the groups'
// columns of the scales: those of allCols (scaleColumns) when not nil,
// else made contiguous first; a tile the kernel stops at (a scale
// outside k's range) and rows after the last whole tile go the other
// paths (encodeGroupPart).
func (l MXFP4Layout) encodeGroups512(out []byte, tab *[256][16]uint16, k *mxfp4Tab512, blocks, scales, allCols []byte, t, ng int) {
	r, cols := l.Prefix[1], l.Cols()
	ex, g := t/cols, t%cols/32
	out = out[:2*32*ng*r]
	var c []byte
	if allCols != nil {
		c = allCols[(ex*l.Groups+g)*r:][:ng*r]
	} else {
		col := mxfp4Cols.Get().(*[]byte)
		defer mxfp4Cols.Put(col)
		if cap(*col) < ng*r {
			*col = make([]byte, ng*r)
		}
		c = (*col)[:ng*r]
		s := scales[(ex*r*l.Groups + g):][:(r-1)*l.Groups+ng]
		for i := 0; i < r; i++ {
			for gg, e := range s[i*l.Groups : i*l.Groups+ng] {
				c[gg*r+i] = e
			}
		}
	}
	stride := l.Groups * 16
	rest := func(i0, i1 int) {
		for gg := 0; gg < ng; gg++ {
			l.encodeGroupPart(out[2*32*gg*r:][:2*32*r], tab, blocks, scales, t+32*gg, 32, i0, i1)
		}
	}
	i := 0
	for i+32 <= r {
		n := (r - i) / 32
		b0 := ((ex*r+i)*l.Groups + g) * 16
		_ = blocks[b0+(32*n-1)*stride+16*ng-1] // the last tile's last row
		d := mxfp4T32AVX512(&out[2*i], 2*r, &blocks[b0], stride, &c[i], r, ng, n, k)
		i += 32 * d
		if d < n {
			rest(i, i+32)
			i += 32
		}
	}
	if i < r {
		rest(i, r)
	}
}
