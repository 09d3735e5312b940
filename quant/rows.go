package quant

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// rowsCodec adapts a codec that decodes whole rows of a logical weight
// flattened to [rows, cols] (the DequantRows of mxfp4.go, nvfp4.go,
// packed.go, gptq.go, awq.go, bnb.go, mlx.go) to the element ranges of
// Codec. A range that starts or ends inside a row decodes the rows it
// touches into a pooled buffer and copies out the part asked for.
type rowsCodec struct {
	rows, cols int64
	codeBytes  int64 // bytes of the stored weight
	// rowSpan is the byte range of the stored weight that rows [r0, r1)
	// need; nil when every row needs the whole weight (GPTQ and AWQ pack
	// a logical row down the stored columns), which WholeCodes reports.
	rowSpan func(r0, r1 int64) (int64, int64)
	// dec decodes rows [r0, r1) into dst from codes (the bytes rowSpan
	// named, or the whole weight) and the companions.
	dec func(dst []float32, codes []byte, comps [][]byte, r0, r1 int) error
	// enc, when set, writes elements [first, first+n) in dt straight
	// from the codes (DequantizeTo's one-pass path); done is false for a
	// dtype it does not write.
	enc func(dt dtype.DType, dst, codes []byte, comps [][]byte, first, n int64) (done bool, err error)
	// align, when above 1, is the element count ChunkAlign reports.
	align int64
	// unit, when above 1, is the element count SpanAlign reports.
	unit int64
	// sub, when set, returns the Span of the units elements [first,
	// first+n) touch (SubCodec).
	sub func(first, n int64) Span
}

func (c *rowsCodec) chunkAlign() int64 { return c.align }
func (c *rowsCodec) spanAlign() int64  { return c.unit }

// SpanAlign returns the element count, from the weight's first element,
// at whose multiples the codes a range needs (CodeSpan) begin and end,
// when a range needs more codes than its own: gpt-oss MXFP4 in the
// transformers layout reports one expert (any of its logical rows reads
// all of its stored rows). A reader whose ranges do not cross these
// boundaries reads each unit's codes once and holds one unit at a time.
// 1 when ranges need only their own codes.
func SpanAlign(c Codec) int64 {
	if a, ok := c.(interface{ spanAlign() int64 }); ok && a.spanAlign() > 1 {
		return a.spanAlign()
	}
	return 1
}

// ChunkAlign returns the element count a reader that splits a weight
// into chunks (decoded in parallel) should make them multiples of, from
// the weight's first element: 1 when any split will do. gpt-oss MXFP4 in
// the transformers layout reports 32 output rows (one group of every
// stored row), which its vector path decodes whole.
func ChunkAlign(c Codec) int64 {
	if a, ok := c.(interface{ chunkAlign() int64 }); ok && a.chunkAlign() > 1 {
		return a.chunkAlign()
	}
	return 1
}

// WholeCodes reports whether every range needs the whole stored weight:
// a reader then reads it once and keeps it while the weight is read,
// instead of reading it again for every range.
func (c *rowsCodec) WholeCodes() bool { return c.rowSpan == nil }

func (c *rowsCodec) rowRange(first, n int64) (int64, int64) {
	if c.cols == 0 {
		return 0, 0
	}
	return first / c.cols, (first + n + c.cols - 1) / c.cols
}

// CodeSpan returns the bytes of the rows the range touches.
func (c *rowsCodec) CodeSpan(first, n int64) (int64, int64) {
	if c.rowSpan == nil {
		return 0, c.codeBytes
	}
	return c.rowSpan(c.rowRange(first, n))
}

// maxRowElems bounds the row length of a rowsCodec: a range decodes the
// whole rows it touches, so a row is the least a reader holds in float32.
const maxRowElems = 1 << 24

// Dequantize decodes the rows the range touches.
func (c *rowsCodec) Dequantize(dst []float32, first int64, codes []byte, comps [][]byte) error {
	n := int64(len(dst))
	if err := c.checkRange(first, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	r0, r1 := c.rowRange(first, n)
	if first == r0*c.cols && n == (r1-r0)*c.cols {
		return c.dec(dst, codes, comps, int(r0), int(r1))
	}
	p := f32Bufs.Get(int((r1 - r0) * c.cols))
	defer f32Bufs.Put(p)
	tmp := *p
	if err := c.dec(tmp, codes, comps, int(r0), int(r1)); err != nil {
		return err
	}
	copy(dst, tmp[first-r0*c.cols:])
	return nil
}

func (c *rowsCodec) checkRange(first, n int64) error {
	if first < 0 || n < 0 || first+n > c.rows*c.cols {
		return fmt.Errorf("%w: elements [%d, %d) outside %d", ErrUnknownLayout, first, first+n, c.rows*c.cols)
	}
	return nil
}

func (c *rowsCodec) dequantizeTo(dt dtype.DType, dst []byte, first int64, codes []byte, comps [][]byte) (bool, error) {
	if c.enc == nil {
		return false, nil
	}
	n := int64(len(dst) / dt.Size())
	if err := c.checkRange(first, n); err != nil {
		return true, err
	}
	if n == 0 {
		return true, nil
	}
	return c.enc(dt, dst, codes, comps, first, n)
}

// rowBytes is a rowSpan for a weight stored row after row, bpr bytes a row.
func rowBytes(bpr int64) func(r0, r1 int64) (int64, int64) {
	return func(r0, r1 int64) (int64, int64) { return r0 * bpr, r1 * bpr }
}
