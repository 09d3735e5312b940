package quant

import (
	"math"
	"sync"
)

// The table decode of block FP8 to bfloat16 (gridCodec.vecTo, where a
// read covers enough rows of a block row): every code of a block has the
// same scale, so the block's 256 bfloat16 products make a table that
// turns a code into its output with a lookup. The table is made by
// fp8Seg itself from the 256 codes, so its entries are fp8Seg's bits
// (NaN, subnormal and overflowing products included) by construction.
// With AVX-512 VBMI (fp8_tab_amd64.s) 64 codes a step look up their low
// and high bytes with VPERMI2B, 128 entries a lookup, about half the
// instructions of fp8Seg's kernel (which decodes, multiplies and rounds
// each code). A block row's tables are kept between reads (fp8TabPool),
// keyed by each block's scale bits, so a table costs 256 codes' decode
// once for the 128 rows of a block in DeepSeek's layout.

// fp8TabBytes is one block's table: the low bytes of the products of
// codes 0-255, then their high bytes.
const fp8TabBytes = 512

// fp8TabMinRows is the fewest rows of a block row that a read must
// cover for the table decode (a table costs 256 codes' decode; its block
// has 128 codes a row in DeepSeek's layout).
const fp8TabMinRows = 4

// fp8TabPerm orders a step's codes so that the byte interleaves of
// fp8_tab_amd64.s (VPUNPCKLBW, VPUNPCKHBW: within 16-byte lanes) put
// their products back in order: lane L's low 8 bytes are codes 8L to
// 8L+7, its high 8 codes 32+8L to 32+8L+7.
var fp8TabPerm = func() (p [64]byte) {
	for l := range 4 {
		for i := range 8 {
			p[16*l+i], p[16*l+8+i] = byte(8*l+i), byte(32+8*l+i)
		}
	}
	return p
}()

// fp8Tabs are one block row's tables, each valid for the constants k and
// its scale's bits.
type fp8Tabs struct {
	k    *fp8Consts
	bits []uint32
	ok   []bool
	tab  []byte
	prod [2 * 256]byte
	// codes are the tables' input: the 256 codes in order, the NaN ones
	// (nan) replaced by zero, which fp8Seg's AVX-512 kernel takes in its
	// steps (a step with a NaN product it leaves to the AVX2 one); the NaN
	// codes' entries are fp8VecGo's.
	codes [256]byte
	nan   []byte
}

var fp8TabPool = sync.Pool{New: func() any { return new(fp8Tabs) }}

// prepare makes the tables of the blocks of row (their scales in float32)
// for k: those built for the same scale bits are kept.
func (t *fp8Tabs) prepare(k *fp8Consts, row []float32) {
	if t.k != k || len(t.ok) < len(row) {
		t.k = k
		t.bits, t.ok = make([]uint32, len(row)), make([]bool, len(row))
		t.tab = make([]byte, len(row)*fp8TabBytes)
		t.nan = t.nan[:0]
		for c := range t.codes {
			t.codes[c] = byte(c)
			if v := k.value(byte(c)); v != v {
				t.codes[c] = 0
				t.nan = append(t.nan, byte(c))
			}
		}
	}
	for j, s := range row {
		b := math.Float32bits(s)
		if t.ok[j] && t.bits[j] == b {
			continue
		}
		fp8Seg(k, fp8ToBF16, t.prod[:], t.codes[:], row[j:j+1], 256, 0)
		for _, c := range t.nan {
			fp8VecGo(k, fp8ToBF16, t.prod[2*int(c):2*int(c)+2], []byte{c}, s)
		}
		fp8TabSplit((*[fp8TabBytes]byte)(t.tab[j*fp8TabBytes:]), &t.prod)
		t.bits[j], t.ok[j] = b, true
	}
}

// seg is fp8Seg to bfloat16 from the tables: row segment q starts off
// codes into block b0 of bw codes.
func (t *fp8Tabs) seg(out, q []byte, b0, bw, off int) {
	tabs := t.tab[b0*fp8TabBytes:]
	if haveFP8Tab512 && bw%64 == 0 && off%64 == 0 && len(q) >= 64 {
		n := len(q) &^ 63
		_ = tabs[((off+n-1)/bw+1)*fp8TabBytes-1]
		fp8TabBF16AVX512(&out[0], &q[0], n, &tabs[0], bw, off, &fp8TabPerm)
		q, out, off = q[n:], out[2*n:], off+n
	}
	out = out[:2*len(q)]
	for j, c := range q {
		tab := tabs[(off+j)/bw*fp8TabBytes:]
		out[2*j], out[2*j+1] = tab[c], tab[256+int(c)]
	}
}
