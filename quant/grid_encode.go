package quant

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// The one-pass path of gridCodec (DequantizeTo): every element of one
// block has the same scale, so a block's 256 possible values, rounded
// and encoded in the output dtype, make a table that turns each code
// byte into its output bytes with one load. A table costs 256 products;
// tiles of fewer elements than gridTableMin (per-group scales of 128,
// ragged edges) encode their products directly instead.

// gridTableMin is the fewest elements of one scale in a range worth a table.
const gridTableMin = 1024

// gridTile is the most elements staged in float32 for a direct encode.
const gridTile = 256

func (c *gridCodec) dequantizeTo(dt dtype.DType, dst []byte, first int64, codes []byte, comps [][]byte) (bool, error) {
	es := int64(dt.Size())
	switch dt {
	case dtype.BFloat16, dtype.Float16, dtype.Float32:
	default:
		return false, nil
	}
	n := int64(len(dst)) / es
	scales, err := c.check(n, first, codes, comps)
	if err != nil {
		return true, err
	}
	if n == 0 {
		return true, nil
	}
	if c.vecFor(dt) {
		c.vecTo(dt, dst, first, codes, scales)
		return true, nil
	}
	tp := gridTabPool.Get().(*gridTables)
	defer gridTabPool.Put(tp)
	ssz := int64(c.scale.Size())
	last := first + n // one past the range's last element
	rowA, rowB := first/c.cols, (last-1)/c.cols+1
	for rb := rowA / c.bh; rb*c.bh < rowB; rb++ {
		ra, rz := max(rowA, rb*c.bh), min(rowB, (rb+1)*c.bh) // the block row's rows in the range
		// A table per block of this block row (or a scale, for the
		// blocks too small for one), then the rows in memory order.
		tp.reset(c.sc, es)
		for blk := int64(0); blk < c.sc; blk++ {
			c0, c1 := blk*c.bw, min(c.cols, (blk+1)*c.bw)
			if max(first, ra*c.cols+c0) >= min(last, (rz-1)*c.cols+c1) {
				continue // no element of this block in the range
			}
			s := dtype.ToFloat32(c.scale, scales[(rb*c.sc+blk)*ssz:])
			tp.scale[blk] = s
			if (rz-ra)*(c1-c0) >= gridTableMin {
				tp.build(blk, es, dt, func(v float32) float32 { return c.product(v, s) }, c.lut)
			}
		}
		for r := ra; r < rz; r++ {
			for blk := int64(0); blk < c.sc; blk++ {
				c0, c1 := blk*c.bw, min(c.cols, (blk+1)*c.bw)
				e0, e1 := max(first, r*c.cols+c0), min(last, r*c.cols+c1)
				if e0 >= e1 {
					continue
				}
				q, out := codes[e0-first:e1-first], dst[(e0-first)*es:(e1-first)*es]
				switch {
				case !tp.has[blk]:
					c.direct(dt, out, q, tp.scale[blk], &tp.tile)
				case es == 2:
					mapCodes16(out, q, (*[256]uint16)(tp.t16[blk*256:]))
				default:
					mapCodes32(out, q, (*[256]uint32)(tp.t32[blk*256:]))
				}
			}
		}
	}
	return true, nil
}

// vecFor reports whether the vector decode (fp8_vec.go) writes dt:
// bfloat16, float16 or float32 from float32 products (bfloat16 and
// float16 also from products rounded to the same dtype: rounding twice
// to it is rounding once).
func (c *gridCodec) vecFor(dt dtype.DType) bool {
	if c.vec == nil {
		return false
	}
	switch dt {
	case dtype.BFloat16, dtype.Float16:
		return c.round == dtype.Float32 || c.round == dt
	case dtype.Float32:
		return c.round == dtype.Float32
	}
	return false
}

// vecTo writes elements [first, first+len(codes)) with the vector decode,
// one call per row segment (fp8Seg), the block row's scales in float32.
func (c *gridCodec) vecTo(dt dtype.DType, dst []byte, first int64, codes, scales []byte) {
	o, _ := fp8OutOf(dt)
	es := int64(o.size())
	ssz := int64(c.scale.Size())
	var small [64]float32
	row := small[:min(c.sc, 64)] // the scales of the block row rb, in float32
	if c.sc > 64 {
		p := f32Bufs.Get(int(c.sc))
		defer f32Bufs.Put(p)
		row = *p
	}
	rb := int64(-1)
	n := int64(len(codes))
	var tabs *fp8Tabs // the block row's tables (fp8_tab.go), where worth them
	useTabs := false
	defer func() {
		if tabs != nil {
			fp8TabPool.Put(tabs)
		}
	}()
	for i := int64(0); i < n; {
		e := first + i
		r, col := e/c.cols, e%c.cols
		if r/c.bh != rb {
			rb = r / c.bh
			for j := range row {
				row[j] = dtype.ToFloat32(c.scale, scales[(rb*c.sc+int64(j))*ssz:])
			}
			// the rows of block row rb in the range
			rows := min((first+n-1)/c.cols+1, (rb+1)*c.bh) - max(first/c.cols, rb*c.bh)
			useTabs = o == fp8ToBF16 && haveFP8Tab512 && c.bw%64 == 0 && rows >= fp8TabMinRows
			if useTabs {
				if tabs == nil {
					tabs = fp8TabPool.Get().(*fp8Tabs)
				}
				tabs.prepare(c.vec, row)
			}
		}
		k := min(n-i, c.cols-col)
		b0 := col / c.bw
		if useTabs {
			tabs.seg(dst[i*es:(i+k)*es], codes[i:i+k], int(b0), int(c.bw), int(col-b0*c.bw))
		} else {
			fp8Seg(c.vec, o, dst[i*es:(i+k)*es], codes[i:i+k], row[b0:], int(c.bw), int(col-b0*c.bw))
		}
		i += k
	}
}

// direct encodes each code's product with s, gridTile at a time.
func (c *gridCodec) direct(dt dtype.DType, out, q []byte, s float32, tile *[gridTile]float32) {
	es := dt.Size()
	for len(q) > 0 {
		k := min(len(q), gridTile)
		for j, b := range q[:k] {
			tile[j] = c.product(c.lut[b], s)
		}
		dtype.EncodeFloat32(dt, out[:k*es], tile[:k])
		q, out = q[k:], out[k*es:]
	}
}

// gridTables holds one block row's tables: entry 256*blk+code is the
// encoded value of code in block blk.
type gridTables struct {
	t16   []uint16
	t32   []uint32
	has   []bool
	scale []float32
	vals  [256]float32
	enc   [256 * 4]byte
	tile  [gridTile]float32
}

var gridTabPool = sync.Pool{New: func() any { return new(gridTables) }}

// reset sizes the tables for sc blocks of es-byte entries, none built.
func (t *gridTables) reset(sc, es int64) {
	if es == 2 && int64(len(t.t16)) < sc*256 {
		t.t16 = make([]uint16, sc*256)
	}
	if es == 4 && int64(len(t.t32)) < sc*256 {
		t.t32 = make([]uint32, sc*256)
	}
	if int64(len(t.has)) < sc {
		t.has, t.scale = make([]bool, sc), make([]float32, sc)
	}
	clear(t.has[:sc])
}

// build fills block blk's table with the encoded value(code) of every code.
func (t *gridTables) build(blk, es int64, dt dtype.DType, value func(float32) float32, lut *[256]float32) {
	for b := range t.vals {
		t.vals[b] = value(lut[b])
	}
	dtype.EncodeFloat32(dt, t.enc[:256*es], t.vals[:])
	le := binary.LittleEndian
	if es == 2 {
		tab := t.t16[blk*256 : blk*256+256]
		for i := range tab {
			tab[i] = le.Uint16(t.enc[2*i:])
		}
	} else {
		tab := t.t32[blk*256 : blk*256+256]
		for i := range tab {
			tab[i] = le.Uint32(t.enc[4*i:])
		}
	}
	t.has[blk] = true
}

// product is one element's float32 value: the code's value times the
// block's scale, rounded to c.round when the scheme multiplies in it.
func (c *gridCodec) product(v, s float32) float32 {
	switch c.round {
	case dtype.BFloat16:
		return dtype.BF16ToF32(dtype.F32ToBF16(v * s))
	case dtype.Float16:
		return dtype.F16ToF32(dtype.F32ToF16(v * s))
	}
	return v * s
}

// mapCodes16 writes t's entry for each code of q into out, little-endian.
func mapCodes16(out, q []byte, t *[256]uint16) {
	out = out[:2*len(q)]
	le := binary.LittleEndian
	// Eight codes a step: one load, two stores.
	for len(q) >= 8 {
		w := le.Uint64(q)
		le.PutUint64(out, uint64(t[byte(w)])|uint64(t[byte(w>>8)])<<16|uint64(t[byte(w>>16)])<<32|uint64(t[byte(w>>24)])<<48)
		le.PutUint64(out[8:], uint64(t[byte(w>>32)])|uint64(t[byte(w>>40)])<<16|uint64(t[byte(w>>48)])<<32|uint64(t[byte(w>>56)])<<48)
		q, out = q[8:], out[16:]
	}
	for j, b := range q {
		binary.LittleEndian.PutUint16(out[2*j:], t[b])
	}
}

// mapCodes32 writes t's entry for each code of q into out, little-endian.
func mapCodes32(out, q []byte, t *[256]uint32) {
	out = out[:4*len(q)]
	le := binary.LittleEndian
	for len(q) >= 8 {
		w := le.Uint64(q)
		le.PutUint64(out, uint64(t[byte(w)])|uint64(t[byte(w>>8)])<<32)
		le.PutUint64(out[8:], uint64(t[byte(w>>16)])|uint64(t[byte(w>>24)])<<32)
		le.PutUint64(out[16:], uint64(t[byte(w>>32)])|uint64(t[byte(w>>40)])<<32)
		le.PutUint64(out[24:], uint64(t[byte(w>>48)])|uint64(t[byte(w>>56)])<<32)
		q, out = q[8:], out[32:]
	}
	for j, b := range q {
		binary.LittleEndian.PutUint32(out[4*j:], t[b])
	}
}

// check validates a range of n elements at first against the codes and
// the scales, and returns the scales.
func (c *gridCodec) check(n, first int64, codes []byte, comps [][]byte) ([]byte, error) {
	if int64(len(codes)) != n {
		return nil, fmt.Errorf("%w: %d code bytes for %d elements", ErrUnknownLayout, len(codes), n)
	}
	if len(comps) < 1 {
		return nil, fmt.Errorf("%w: no scales", ErrMissingCompanion)
	}
	scales, ssz := comps[0], int64(c.scale.Size())
	sr := (c.rows + c.bh - 1) / c.bh
	if int64(len(scales)) != sr*c.sc*ssz {
		return nil, fmt.Errorf("%w: %d bytes of scales, want %d", ErrCompanionShape, len(scales), sr*c.sc*ssz)
	}
	if first < 0 || first+n > c.rows*c.cols {
		return nil, fmt.Errorf("%w: elements [%d, %d) outside %d", ErrUnknownLayout, first, first+n, c.rows*c.cols)
	}
	return scales, nil
}
