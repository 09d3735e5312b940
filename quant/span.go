package quant

// Span is the part of a weight that whole units of SpanAlign make (one
// gpt-oss MXFP4 expert or more), as a weight of its own: a reader that
// holds the codes of one span at a time holds only that span's part of
// the companions too (read into buffers it reuses), not the companions
// whole.
type Span struct {
	// Codec decodes the span's elements: the weight's element Shift+k
	// is its element k. It takes as its companions the bytes CompRanges
	// names (one [begin, end) per companion of the weight), as whole
	// companions, and as codes the same bytes the weight's codec takes
	// (CodeSpan of the weight's codec, not of this one).
	Codec      Codec
	Shift, Len int64 // the span is the weight's elements [Shift, Shift+Len)
	CompRanges [][2]int64

	prepare func(comps [][]byte, buf []byte) (Codec, []byte)
}

// SubCodec returns the Span of the units that elements [first, first+n)
// of c's weight touch, for a codec that can read its companions a span
// at a time (gpt-oss MXFP4 in the transformers layout: whole experts and
// their scales); ok is false for every other codec, which takes its
// companions whole.
func SubCodec(c Codec, first, n int64) (s Span, ok bool) {
	rc, ok := c.(*rowsCodec)
	if !ok || rc.sub == nil || first < 0 || n <= 0 || rc.checkRange(first, n) != nil {
		return Span{}, false
	}
	return rc.sub(first, n), true
}

// Prepare returns the span's codec over comps (the bytes CompRanges
// names; the codec keeps them while it is used), made faster where it
// can be with memory from buf, grown when short and returned for the
// caller to reuse once the codec is let go: gpt-oss MXFP4's scales
// become the columns its AVX-512 kernel reads, each expert's transposed
// once, where DequantizeTo otherwise makes the columns a call needs on
// every call (down every stored row of the expert, a cache line each).
// The bits are the same either way.
func (s Span) Prepare(comps [][]byte, buf []byte) (Codec, []byte) {
	if s.prepare == nil {
		return s.Codec, buf
	}
	return s.prepare(comps, buf)
}

func growByte(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
