package statedict

import (
	"fmt"
	"io"
	"sync"

	"github.com/ckpt-dev/ckpt/internal/par"
	"github.com/ckpt-dev/ckpt/quant"
)

// The spans of codes a quantSource reads (quant_read.go): each the
// stored bytes of a range of the weight and, for a codec that takes its
// companions a span at a time (quant.SubCodec: gpt-oss MXFP4, whole
// experts), that span's part of the companions (an expert's scales) and
// the span's own codec over them, its scale columns made once
// (quant.Span.Prepare). All in buffers from free lists, so that a long
// conversion reads into the same few buffers: read whole into fresh
// memory, gpt-oss-20b's scales alone were 6 k page faults a layer. While
// a stream decodes one span, the next is read on another goroutine
// (readAhead: by a decode worker, or for a unit on its own goroutine), so
// that the decoding does not wait for the read.

// codeSpan is bytes [b, e) of the stored weight, held by refs reads, for
// the weight's elements [f0, f1) (all of them for a codec that needs the
// whole stored weight, whole units for a quant.SubCodec), decoded by codec (the weight's, or the span's over
// comps, whose element 0 is the weight's element shift).
type codeSpan struct {
	b, e   int64
	buf    *[]byte
	refs   int
	f0, f1 int64
	codec  quant.Codec
	shift  int64
	comps  [][]byte
	cbufs  []*[]byte // comps' buffers, for a span of a quant.SubCodec
	prep   *[]byte   // what Prepare made (scale columns)
}

// covers reports whether sp holds the codes [b, e) of elements [f0, f1).
func (sp *codeSpan) covers(b, e, f0, f1 int64) bool {
	return sp.b <= b && e <= sp.e && sp.f0 <= f0 && f1 <= sp.f1
}

// compBufs and prepBufs hold the companions' parts and the prepared
// columns of spans (spanBufs, quant_read.go, their codes).
var (
	compBufs = &par.FreeList[byte]{Max: 4}
	prepBufs = &par.FreeList[byte]{Max: 4}
)

// spans holds codeSpans no longer used, for readSpan to reuse (a diff
// reads a span for every 64 Ki elements).
var spans = sync.Pool{New: func() any { return new(codeSpan) }}

// putSpan gives sp's buffers back, and sp: nothing refers to it after.
func putSpan(sp *codeSpan) {
	spanBufs.Put(sp.buf)
	for _, b := range sp.cbufs {
		compBufs.Put(b)
	}
	prepBufs.Put(sp.prep)
	*sp = codeSpan{}
	spans.Put(sp)
}

// spanRange returns the stored bytes and the elements a span holding
// elements [first, last) covers.
func (s *quantSource) spanRange(first, last int64) (b, e, f0, f1 int64, sub quant.Span) {
	if w, ok := s.codec.(wholeCodes); ok && w.WholeCodes() {
		_, end := s.codec.CodeSpan(0, s.numel)
		return 0, end, 0, s.numel, sub
	}
	b, e = s.codec.CodeSpan(first, last-first)
	if s.compAt != nil {
		sub, _ = quant.SubCodec(s.codec, first, last-first)
		return b, e, sub.Shift, sub.Shift + sub.Len, sub
	}
	return b, e, first, last, sub
}

// readSpan reads the span holding elements [first, last).
func (s *quantSource) readSpan(first, last int64) (*codeSpan, error) {
	b, e, f0, f1, sub := s.spanRange(first, last)
	sp := spans.Get().(*codeSpan)
	*sp = codeSpan{b: b, e: e, f0: f0, f1: f1, codec: s.codec, comps: s.compData, refs: 1}
	sp.buf = spanBufs.Get(int(e - b))
	if err := readFull(s.codesAt, *sp.buf, s.codesOff+b); err != nil {
		putSpan(sp)
		return nil, err
	}
	if s.compAt == nil {
		return sp, nil
	}
	if len(sub.CompRanges) != len(s.compAt) {
		putSpan(sp)
		return nil, fmt.Errorf("%w: %d companions, the codec takes %d", ErrMalformed, len(s.compAt), len(sub.CompRanges))
	}
	sp.comps = make([][]byte, len(s.compAt))
	for i, at := range s.compAt {
		rg := sub.CompRanges[i]
		cb := compBufs.Get(int(rg[1] - rg[0]))
		sp.cbufs = append(sp.cbufs, cb)
		if err := readFull(at, *cb, s.compOff[i]+rg[0]); err != nil {
			putSpan(sp)
			return nil, fmt.Errorf("companion %s: %w", s.comps[i].Name, err)
		}
		sp.comps[i] = *cb
	}
	sp.prep = prepBufs.Get(0)
	var buf []byte
	sp.codec, buf = sub.Prepare(sp.comps, *sp.prep)
	*sp.prep = buf
	sp.shift = sub.Shift
	return sp, nil
}

func readFull(r io.ReaderAt, p []byte, off int64) error {
	if _, err := r.ReadAt(p, off); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// aheadSpan is a span being read ahead of the stream.
type aheadSpan struct {
	first, last int64
	done        chan struct{}
	sp          *codeSpan
	err         error
}

// takeAhead returns the span read ahead when it covers codes [b, e) of
// elements [f0, f1), waiting for its read; one that does not is given
// back. nil when none does. Called without s.mu.
func (s *quantSource) takeAhead(b, e, f0, f1 int64) *codeSpan {
	s.mu.Lock()
	a := s.ahead
	s.ahead = nil
	s.mu.Unlock()
	if a == nil {
		return nil
	}
	<-a.done
	if a.err != nil {
		return nil
	}
	if a.sp.covers(b, e, f0, f1) {
		return a.sp
	}
	putSpan(a.sp)
	return nil
}

// quantAhead is the least number of elements read ahead for a codec
// without spans of whole units: a stream's first read is often short
// (what is left of a writer's buffer), and a read ahead of only as many
// elements would not cover the next, full one (a 4 MiB buffer of
// bfloat16 is 2 Mi elements).
const quantAhead = 2 << 20

// readAhead returns the read of the span after sp, which a read of
// elements [first, last) holds, when the reads come in order (inOrder)
// and the weight has more: for a codec with spans of whole units the
// next unit, read on a goroutine of its own (once a unit, while the
// unit's reads decode); else at least as many elements after sp as the
// read had, which the caller runs on one of its decode workers (once a
// read: a goroutine of its own each time cost more in wake-ups than the
// overlap gained), only when the read has another worker decoding
// meanwhile (overlap). A read decoded by one worker (a diff's small reads
// in order, one goroutine a pair) reads its own codes: a read ahead would
// run after it on the same goroutine, gaining nothing, into a span of
// quantAhead codes that does not stay in the cache until it is decoded
// (2 MiB of FP8 codes: the decode waited on memory for 60 % of its time,
// and the kernel's copy into it cost 3 times cat's a byte). nil when
// there is none. Called with s.mu held.
func (s *quantSource) readAhead(sp *codeSpan, first, last int64, inOrder, overlap bool) func() {
	if w, ok := s.codec.(wholeCodes); ok && w.WholeCodes() {
		return nil
	}
	if s.compAt == nil && !overlap {
		return nil
	}
	next, end := sp.f1, sp.f1+max(last-first, quantAhead)
	if s.compAt != nil {
		end = sp.f1 + 1
	}
	end = min(end, s.numel)
	if !inOrder || next >= end || s.ahead != nil {
		return nil
	}
	a := &aheadSpan{first: next, last: end, done: make(chan struct{})}
	s.ahead = a
	read := func() {
		defer close(a.done)
		a.sp, a.err = s.readSpan(a.first, a.last)
	}
	if s.compAt != nil {
		go read()
		return nil
	}
	return read
}
