package statedict

import (
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/par"
	"github.com/ckpt-dev/ckpt/quant"
)

// quantSource serves a quantized weight's logical elements, little-endian
// in the logical dtype (float32 products rounded as dtype.EncodeFloat32
// rounds: to nearest even for bfloat16, as torch's .to(bfloat16)),
// decoding the codes a range covers with the scheme's codec
// (quant.DequantizeTo: block FP8 and MXFP4 straight into the caller's
// bytes, other codecs through a float32 buffer). Companions (scales) are
// read whole once, or for a codec with spans of whole units
// (quant.SubCodec: gpt-oss MXFP4 experts) a span's part with the span
// (quant_span.go). The codes of a read are read once for the whole
// range, in chunks decoded on all cores, into a span that is kept for
// the next read when it covers it: MXFP4's transposed rows need a whole
// expert's codes for any of them, and a codec whose every range needs
// the whole stored weight (quant's WholeCodes: GPTQ, AWQ) has it read
// once. The span is let go once every logical byte has been served and
// no read is in flight, so a convert holds the codes of the weights it
// is writing, not of the whole model.
type quantSource struct {
	codes *Tensor
	comps []*Tensor
	codec quant.Codec
	dt    dtype.DType
	numel int64
	name  string

	once     sync.Once
	compData [][]byte
	codesAt  io.ReaderAt
	codesOff int64
	err      error

	// compAt, compOff: where each companion is read, a span's part at
	// a time, for a codec that takes them so (quant.SubCodec); nil
	// when compData holds them whole.
	compAt  []io.ReaderAt
	compOff []int64

	mu        sync.Mutex
	span      *codeSpan   // the codes last read, while they may serve another read
	served    int64       // logical bytes served since a span was last let go
	ahead     *aheadSpan  // the span being read ahead
	nextFirst int64       // the element a read in order starts at next
	hashNext  *ChunkHash  // the next stream of the whole weight is hashed so (HashStream)
	hashed    *streamHash // the digest of the last such stream
}

// wholeCodes is implemented by codecs that need the whole stored weight for every range.
type wholeCodes interface{ WholeCodes() bool }

// spanBufs holds the code spans' buffers: a free list the collector does
// not empty, so that a long conversion reads its codes into the same few
// buffers (on some VMs every fresh page costs a fault of ~10 us).
var spanBufs = &par.FreeList[byte]{Max: 4}

// acquireSpan returns a span holding the codes of elements [first,
// last): the kept one when it covers them, else the one read ahead when
// it does, else one read now; it is kept instead, and the span after it
// is read ahead (the read returned, for the caller to run while its other
// workers decode, or started): a read decoded by one worker (overlap
// false) has no worker to read ahead while it decodes.
func (s *quantSource) acquireSpan(first, last int64, overlap bool) (*codeSpan, func(), error) {
	b, e, f0, f1, _ := s.spanRange(first, last)
	s.mu.Lock()
	inOrder := first == s.nextFirst
	s.nextFirst = last
	if sp := s.span; sp != nil && sp.covers(b, e, f0, f1) {
		sp.refs++
		s.mu.Unlock()
		return sp, nil, nil
	}
	if old := s.span; old != nil && old.refs == 0 {
		// No read holds it: its buffers can take the codes read next.
		s.span = nil
		putSpan(old)
	}
	s.mu.Unlock()
	sp := s.takeAhead(b, e, f0, f1)
	if sp == nil {
		var err error
		if sp, err = s.readSpan(first, last); err != nil {
			return nil, nil, err
		}
	}
	s.mu.Lock()
	if old := s.span; old != nil && old.refs == 0 {
		putSpan(old)
	}
	s.span = sp
	ahead := s.readAhead(sp, first, last, inOrder, overlap)
	s.mu.Unlock()
	return sp, ahead, nil
}

// releaseSpan ends a read of n logical bytes from sp. A span no longer
// kept goes back to the pool once no read holds it; the kept one once
// as many bytes as the weight has have been served and no read holds it.
func (s *quantSource) releaseSpan(sp *codeSpan, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp.refs--
	if sp != s.span && sp.refs == 0 {
		putSpan(sp)
	}
	s.served += n
	if k := s.span; k != nil && k.refs == 0 && s.served >= s.numel*int64(s.dt.Size()) {
		s.span, s.served = nil, 0
		putSpan(k)
	}
}

// quantChunk is how many elements one worker decodes at a time.
const quantChunk = 1 << 18

func (s *quantSource) prepare() error {
	s.once.Do(func() {
		if _, ok := quant.SubCodec(s.codec, 0, 1); ok && s.spanComps() {
			return
		}
		for _, c := range s.comps {
			b, err := c.ReadAll()
			if err != nil {
				s.err = fmt.Errorf("companion %s: %w", c.Name, err)
				return
			}
			s.compData = append(s.compData, b)
		}
		s.codesAt, s.codesOff, s.err = contiguousAt(s.codes)
	})
	return s.err
}

// spanComps sets up reading the codes and each companion a span at a
// time; false (nothing set) when a companion is not a contiguous
// little-endian tensor.
func (s *quantSource) spanComps() bool {
	var ats []io.ReaderAt
	var offs []int64
	for _, c := range s.comps {
		at, off, err := contiguousAt(c)
		if err != nil {
			return false
		}
		ats, offs = append(ats, at), append(offs, off)
	}
	codesAt, codesOff, err := contiguousAt(s.codes)
	if err != nil {
		s.err = err
		return true
	}
	s.codesAt, s.codesOff, s.compAt, s.compOff = codesAt, codesOff, ats, offs
	return true
}

// contiguousAt returns where t's bytes are read, for a contiguous
// little-endian tensor.
func contiguousAt(t *Tensor) (io.ReaderAt, int64, error) {
	if !t.IsContiguous() || t.Storage.BigEndian && t.DType.Size() > 1 {
		return nil, 0, fmt.Errorf("%w: stored %s is not a contiguous little-endian tensor", ErrUnsupported, t.Name)
	}
	r, err := t.Storage.ReaderAt()
	if err != nil {
		return nil, 0, err
	}
	off, _ := t.Span()
	return r, off, nil
}

// quantWindow is the most logical bytes a stream of a quantized weight
// decodes at a time: enough chunks for every core.
const quantWindow = 8 << 20

func (s *quantSource) open(off, n int64) (io.ReadCloser, error) {
	if err := s.prepare(); err != nil {
		return nil, err
	}
	q := &quantStream{s: s, off: off, end: off + n}
	s.mu.Lock()
	if total := s.numel * int64(s.dt.Size()); s.hashNext != nil && off == 0 && n == total {
		q.hash = newStreamHash(total, *s.hashNext)
		s.hashed = q.hash
	}
	s.hashNext = nil
	s.mu.Unlock()
	return io.NopCloser(q), nil
}

func (s *quantSource) readerAt() (io.ReaderAt, error) {
	if err := s.prepare(); err != nil {
		return nil, err
	}
	return s, nil
}

// quantStream reads [off, end) of a quantSource in order: a Read of at
// least quantDirect bytes (a writer's buffer) is decoded straight into
// the caller's bytes, a smaller one through a window of its own.
type quantStream struct {
	s        *quantSource
	off, end int64
	buf      []byte
	pending  []byte
	hash     *streamHash // nil: not hashed
}

// quantDirect is the least Read that decodes into the caller's buffer.
const quantDirect = 1 << 20

func (q *quantStream) Read(p []byte) (int, error) {
	if len(q.pending) > 0 {
		n := copy(p, q.pending)
		q.pending = q.pending[n:]
		return n, nil
	}
	if q.off >= q.end {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	lim := min(int64(len(p)), q.end-q.off, quantWindow)
	if n := q.s.readLen(q.off, lim); len(p) >= quantDirect || n < lim {
		// A writer's buffer, or as much of p as ends on a whole chunk.
		n, err := q.s.readAt(p[:n], q.off, q.hash)
		q.off += int64(n)
		if err == io.EOF && n > 0 {
			err = nil
		}
		return n, err
	}
	// A small read, or the rest of a buffer smaller than a whole chunk:
	// decode a window (for a codec whose chunks are aligned, just up to
	// the next chunk edge, so that the reads after it are aligned again
	// and little is copied) and serve p from it.
	n := min(q.end-q.off, quantWindow)
	if a := quant.ChunkAlign(q.s.codec); a > 1 && a*int64(q.s.dt.Size()) <= quantWindow {
		a *= int64(q.s.dt.Size())
		n = min(n, a-q.off%a)
	}
	n = q.s.readLen(q.off, n)
	if int64(cap(q.buf)) < n {
		q.buf = make([]byte, n)
	}
	k, err := q.s.readAt(q.buf[:n], q.off, q.hash)
	q.off += int64(k)
	if err == io.EOF && k > 0 {
		err = nil
	}
	q.pending = q.buf[:k]
	m := copy(p, q.pending)
	q.pending = q.pending[m:]
	return m, err
}

// readLen cuts a stream's read of n logical bytes at off so that it
// does not cross a boundary of the codec's code units (quant.SpanAlign:
// one MXFP4 expert, whose codes are then read once and held alone) and,
// where it can, ends on a whole chunk (quant.ChunkAlign: 32 MXFP4 output
// rows, which the vector path decodes whole; a read ending inside one
// decodes it through a buffer and copies it, and so does the next read).
func (s *quantSource) readLen(off, n int64) int64 {
	es := int64(s.dt.Size())
	end := off + n
	if u := quant.SpanAlign(s.codec) * es; u > es {
		end = min(end, (off/u+1)*u)
	}
	if a := quant.ChunkAlign(s.codec) * es; a > es && end < s.numel*es {
		if e := end / a * a; e > off {
			end = e
		}
	}
	return end - off
}

// ReadAt fills p with the logical bytes at off, decoding chunks of
// elements in parallel.
func (s *quantSource) ReadAt(p []byte, off int64) (int, error) { return s.readAt(p, off, nil) }

// readAt is ReadAt, the bytes also hashed into h when it is not nil (by
// each worker the chunks inside what it wrote, then the rest: h.read).
func (s *quantSource) readAt(p []byte, off int64, h *streamHash) (int, error) {
	if err := s.prepare(); err != nil {
		return 0, err
	}
	es := int64(s.dt.Size())
	total := s.numel * es
	if off < 0 {
		return 0, fmt.Errorf("negative offset")
	}
	if off >= total {
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > total-off {
		p = p[:total-off]
	}
	first, last := off/es, (off+int64(len(p))+es-1)/es
	// Chunks end at base + multiples of step: counted from the weight's
	// first element, or for a codec that asks for whole groups
	// (quant.ChunkAlign) from the group the range starts in, the range
	// cut in one run of whole groups a worker (MXFP4's kernel decodes all
	// the groups of a chunk in one pass down the stored rows, each row's
	// codes read from memory once).
	step, base := int64(quantChunk), int64(0)
	procs := int64(runtime.GOMAXPROCS(0))
	if a := quant.ChunkAlign(s.codec); a > 1 && a <= 4*quantChunk {
		step = (quantChunk + a - 1) / a * a
		base = first / a * a
		if per := ((last-base+procs-1)/procs + a - 1) / a * a; per > step {
			step = per
		}
	}
	nchunks := (last-1-base)/step - (first-base)/step + 1
	workers := min(procs, nchunks)
	// The codes of the whole range are read once (or kept from the read
	// before), each chunk decoding from its part of them.
	sp, ahead, err := s.acquireSpan(first, last, workers > 1)
	if err != nil {
		return 0, err
	}
	defer s.releaseSpan(sp, int64(len(p)))
	ck := chunking{base: base, step: step, last: last}
	if workers > 1 {
		err = s.decodeParallel(p, off, first, ck, workers, sp, ahead, h)
	} else {
		// One worker: the chunks in order on this goroutine, nothing
		// allocated (a diff makes such a read for every 64 Ki elements).
		var enc []byte
		for e0 := first; e0 < last && err == nil; e0 = ck.end(e0) {
			err = s.decodeOne(p, off, e0, ck.end(e0)-e0, sp, &enc, h)
		}
		if ahead != nil { // none is returned for one worker (readAhead); run one all the same, or its waiter would wait forever
			ahead()
		}
	}
	if err != nil {
		return 0, err
	}
	if h != nil {
		if err := h.read(p, off); err != nil {
			return 0, &Error{Tensor: s.name, Err: err}
		}
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// chunking is how readAt cuts elements [.., last) into chunks: each ends
// at base + a multiple of step, or at last.
type chunking struct{ base, step, last int64 }

// end returns the end of the chunk starting at element e0.
func (c chunking) end(e0 int64) int64 {
	return min(c.base+((e0-c.base)/c.step+1)*c.step, c.last)
}

// decodeParallel decodes the chunks of [first, ck.last) on workers
// goroutines, the first of the others running ahead (when not nil)
// before it decodes.
func (s *quantSource) decodeParallel(p []byte, off, first int64, ck chunking, workers int64, sp *codeSpan, ahead func(), h *streamHash) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     = make(chan int64, (ck.last-first)/ck.step+2)
	)
	for e0 := first; e0 < ck.last; e0 = ck.end(e0) {
		next <- e0
	}
	close(next)
	decode := func() {
		var enc []byte
		for e0 := range next {
			if err := s.decodeOne(p, off, e0, ck.end(e0)-e0, sp, &enc, h); err != nil {
				setErr(&mu, &firstErr, err)
				return
			}
		}
	}
	for w := int64(1); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w == 1 && ahead != nil {
				ahead()
			}
			decode()
		}()
	}
	decode()
	wg.Wait()
	return firstErr
}

// decodeOne is decodeChunk, its error naming the weight, and the bytes
// also hashed into h when it is not nil (the chunks inside what was
// written).
func (s *quantSource) decodeOne(p []byte, off, e0, n int64, sp *codeSpan, enc *[]byte, h *streamHash) error {
	if err := s.decodeChunk(p, off, e0, n, sp, enc); err != nil {
		return &Error{Tensor: s.name, Err: err}
	}
	if h != nil {
		es := int64(s.dt.Size())
		h.hashWhole(p, off, max(e0*es, off), min((e0+n)*es, off+int64(len(p))))
	}
	return nil
}

// decodeChunk writes the part of logical elements [e0, e0+n) that p
// (logical bytes from off) holds: straight into p when it holds them
// all, else through enc.
func (s *quantSource) decodeChunk(p []byte, off, e0, n int64, sp *codeSpan, enc *[]byte) error {
	es := int64(s.dt.Size())
	b, end := s.codec.CodeSpan(e0, n)
	if b < sp.b || end > sp.e {
		return fmt.Errorf("%w: codes [%d, %d) outside the range's [%d, %d)", ErrMalformed, b, end, sp.b, sp.e)
	}
	codes := (*sp.buf)[b-sp.b : end-sp.b]
	lo, hi := max(e0*es, off), min((e0+n)*es, off+int64(len(p)))
	if lo == e0*es && hi == (e0+n)*es {
		return quant.DequantizeTo(sp.codec, s.dt, p[lo-off:hi-off], e0-sp.shift, codes, sp.comps)
	}
	*enc = grow(*enc, n*es)
	if err := quant.DequantizeTo(sp.codec, s.dt, *enc, e0-sp.shift, codes, sp.comps); err != nil {
		return err
	}
	copy(p[lo-off:hi-off], (*enc)[lo-e0*es:hi-e0*es])
	return nil
}

func setErr(mu *sync.Mutex, dst *error, err error) {
	mu.Lock()
	if *dst == nil {
		*dst = err
	}
	mu.Unlock()
}

func grow(b []byte, n int64) []byte {
	if int64(cap(b)) < n {
		return make([]byte, n)
	}
	return b[:n]
}
