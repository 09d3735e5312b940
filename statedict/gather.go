package statedict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
)

// piece is a box [lo, hi) of a logical tensor whose elements lie in a
// strided storage: element i (global index) is at storage element
// off + sum((i[d]-lo[d]) * strides[d]) of ra. A plain tensor is one piece
// covering its shape; a DCP tensor is one piece per chunk.
type piece struct {
	lo, hi  []int64
	ra      io.ReaderAt // storage bytes in file order
	off     int64       // storage offset in elements
	strides []int64
	contig  bool // C-contiguous over the piece's own box
	swap    int  // byte-swap unit for big-endian storages, 0 for none
	file    string
	// crc is the CRC32 of the piece's whole storage, checked when a stream
	// reads the whole piece (hasCRC: the storage holds exactly the piece).
	crc    uint32
	hasCRC bool
}

// tensorPiece is the piece of a whole (non-DCP) tensor.
func tensorPiece(t *Tensor) (*piece, error) {
	if t.Storage == nil || t.Storage.src == nil {
		return nil, &Error{Tensor: t.Name, Err: ErrNoData}
	}
	if _, ok := t.Storage.src.(*gatherSource); ok {
		return nil, fmt.Errorf("%w: tensor %q is assembled from chunks", ErrUnsupported, t.Name)
	}
	ra, err := t.Storage.ReaderAt()
	if err != nil {
		return nil, &Error{File: t.Storage.File, Record: t.Storage.Record, Tensor: t.Name, Err: err}
	}
	if _, ok := extentBytes(t); !ok {
		return nil, &Error{File: t.Storage.File, Record: t.Storage.Record, Tensor: t.Name, Err: ErrShortStorage}
	}
	p := &piece{lo: make([]int64, len(t.Shape)), hi: t.Shape, ra: ra, off: t.Offset, strides: t.Strides,
		contig: t.IsContiguous(), file: t.Storage.File}
	if t.Storage.BigEndian && t.DType.SwapUnit() > 1 {
		p.swap = t.DType.SwapUnit()
	}
	return p, nil
}

// gather reads boxes of a logical tensor made of pieces.
type gather struct {
	name  string
	dtype dtype.DType
	shape []int64
	dcp   *dcpTensor // set for DCP tensors
	// pieces returns the pieces that hold elements of the box [lo, hi)
	// (it may return more), opening only those.
	pieces func(lo, hi []int64) ([]*piece, error)
}

// gatherSource is the storage source of a DCP tensor or of a slice: the
// C-order elements of the box [lo, hi) of g.
type gatherSource struct {
	g      *gather
	lo, hi []int64
}

func (s *gatherSource) nbytes() int64 {
	n := int64(s.g.dtype.Size())
	for d := range s.lo {
		n *= s.hi[d] - s.lo[d]
	}
	return n
}

func (s *gatherSource) open(off, n int64) (io.ReadCloser, error) {
	if off == 0 && n == s.nbytes() {
		return s.g.stream(s.lo, s.hi)
	}
	ra, err := s.readerAt()
	if err != nil {
		return nil, err
	}
	return io.NopCloser(io.NewSectionReader(ra, off, n)), nil
}

func (s *gatherSource) readerAt() (io.ReaderAt, error) {
	ps, err := s.g.pieces(s.lo, s.hi)
	if err != nil {
		return nil, err
	}
	return &boxReaderAt{g: s.g, ps: ps, lo: s.lo, hi: s.hi, size: s.nbytes()}, nil
}

// find returns the piece holding idx, trying hint first.
func findPiece(ps []*piece, idx []int64, hint int) int {
	for k := range ps {
		i := (hint + k) % len(ps)
		p := ps[i]
		in := true
		for d, v := range idx {
			if v < p.lo[d] || v >= p.hi[d] {
				in = false
				break
			}
		}
		if in {
			return i
		}
	}
	return -1
}

// runLen is the number of elements from idx on that are consecutive both
// in the C order of the box [lo, hi) and in piece p's storage.
func runLen(p *piece, idx, lo, hi []int64) int64 {
	nd := len(idx)
	if nd == 0 {
		return 1
	}
	last := nd - 1
	end := min(hi[last], p.hi[last])
	run := end - idx[last]
	if !p.contig {
		if p.strides[last] != 1 && run > 1 {
			return 1
		}
		return run
	}
	inner := int64(1)
	for d := last; d > 0; d-- {
		// Extend over dim d-1 only when dims >= d are whole in the box,
		// in the piece, and at their start.
		if idx[d] != lo[d] || p.lo[d] != lo[d] || p.hi[d] != hi[d] {
			break
		}
		inner *= hi[d] - lo[d]
		run = (min(hi[d-1], p.hi[d-1]) - idx[d-1]) * inner
	}
	return run
}

// storagePos is the storage element of global index idx in p.
func storagePos(p *piece, idx []int64) int64 {
	pos := p.off
	for d, v := range idx {
		pos += (v - p.lo[d]) * p.strides[d]
	}
	return pos
}

// advance moves idx forward by n elements in the C order of [lo, hi).
func advance(idx, lo, hi []int64, n int64) {
	for d := len(idx) - 1; d >= 0 && n > 0; d-- {
		ext := hi[d] - lo[d]
		v := idx[d] - lo[d] + n
		idx[d] = lo[d] + v%ext
		n = v / ext
	}
}

func boxElems(lo, hi []int64) int64 {
	n := int64(1)
	for d := range lo {
		n *= hi[d] - lo[d]
	}
	return n
}

// boxReaderAt gives random access to the C-order bytes of a box.
type boxReaderAt struct {
	g      *gather
	ps     []*piece
	lo, hi []int64
	size   int64
}

func (b *boxReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrMalformed)
	}
	if off >= b.size {
		return 0, io.EOF
	}
	want := len(p)
	p = p[:min(int64(len(p)), b.size-off)]
	es := int64(b.g.dtype.Size())
	idx := make([]int64, len(b.lo))
	copy(idx, b.lo)
	advance(idx, b.lo, b.hi, off/es)
	skip := off % es
	n := 0
	hint := 0
	var tmp []byte
	for n < len(p) {
		i := findPiece(b.ps, idx, hint)
		if i < 0 {
			return n, &Error{Tensor: b.g.name, Err: fromFormat(fmt.Errorf("%w: no chunk holds index %v", dcp.ErrTiling, idx))}
		}
		hint = i
		pc := b.ps[i]
		run := runLen(pc, idx, b.lo, b.hi)
		pos := storagePos(pc, idx) * es
		k := min(run*es-skip, int64(len(p)-n))
		if pc.swap > 0 {
			// Read whole elements to swap them, then copy the part wanted.
			full := ((skip + k + es - 1) / es) * es
			if int64(cap(tmp)) < full {
				tmp = make([]byte, full)
			}
			if _, err := pc.ra.ReadAt(tmp[:full], pos); err != nil {
				return n, &Error{File: pc.file, Tensor: b.g.name, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
			}
			SwapBytes(tmp[:full], pc.swap)
			copy(p[n:n+int(k)], tmp[skip:skip+k])
		} else if _, err := pc.ra.ReadAt(p[n:n+int(k)], pos+skip); err != nil {
			return n, &Error{File: pc.file, Tensor: b.g.name, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		n += int(k)
		advance(idx, b.lo, b.hi, (skip+k)/es)
		skip = (skip + k) % es
	}
	if n < want {
		return n, io.EOF
	}
	return n, nil
}

// stream returns the C-order bytes of the box [lo, hi), reading each piece
// sequentially through its own bounded buffer: only the bytes the box
// needs are read, consecutive ones in one read.
func (g *gather) stream(lo, hi []int64) (io.ReadCloser, error) {
	ps, err := g.pieces(lo, hi)
	if err != nil {
		return nil, err
	}
	s := &boxStream{g: g, ps: ps, lo: lo, hi: hi, idx: append([]int64(nil), lo...), left: boxElems(lo, hi),
		es: int64(g.dtype.Size()), subs: make([]*pieceStream, len(ps))}
	s.buf = min(1<<20, max(64<<10, (8<<20)/max(1, len(ps))))
	s.buf = s.buf / int(s.es) * int(s.es)
	return s, nil
}

type boxStream struct {
	g       *gather
	ps      []*piece
	lo, hi  []int64
	idx     []int64
	left    int64 // elements not yet assigned to a run
	es      int64
	subs    []*pieceStream
	cur     *pieceStream
	runLeft int64 // bytes of the current run not yet delivered
	hint    int
	buf     int
}

func (s *boxStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if s.runLeft == 0 {
			if s.left == 0 {
				break
			}
			i := findPiece(s.ps, s.idx, s.hint)
			if i < 0 {
				return n, &Error{Tensor: s.g.name, Err: fromFormat(fmt.Errorf("%w: no chunk holds index %v", dcp.ErrTiling, s.idx))}
			}
			s.hint = i
			if s.subs[i] == nil {
				s.subs[i] = newPieceStream(s.ps[i], s.lo, s.hi, s.es, s.buf)
			}
			s.cur = s.subs[i]
			run := runLen(s.ps[i], s.idx, s.lo, s.hi)
			run = min(run, s.left)
			advance(s.idx, s.lo, s.hi, run)
			s.left -= run
			s.runLeft = run * s.es
		}
		k := int(min(s.runLeft, int64(len(p)-n)))
		m, err := s.cur.read(p[n : n+k])
		n += m
		s.runLeft -= int64(m)
		if err != nil {
			if !errors.Is(err, ErrChunkCRC) {
				err = fmt.Errorf("%w: %v", ErrTruncated, err)
			}
			return n, &Error{File: s.cur.p.file, Tensor: s.g.name, Err: err}
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (s *boxStream) Close() error { return nil }

// pieceStream delivers, in C order, the bytes of the elements of a piece
// that lie in a box, through a buffer of at most bufSize bytes refilled
// with reads of consecutive storage bytes only.
type pieceStream struct {
	p       *piece
	lo, hi  []int64 // the box ∩ the piece
	idx     []int64 // next element to schedule
	left    int64   // elements not yet scheduled
	es      int64
	srcPos  int64 // byte position in storage of the current source run
	srcLeft int64 // bytes left in the current source run
	buf     []byte
	r, w    int
	bufSize int
	crc     uint32
	check   bool // the stream reads the whole piece: check p.crc at its end
	checked bool // and it did, and the CRC32 matched
}

func newPieceStream(p *piece, lo, hi []int64, es int64, bufSize int) *pieceStream {
	s := &pieceStream{p: p, es: es, bufSize: bufSize}
	nd := len(lo)
	s.lo, s.hi = make([]int64, nd), make([]int64, nd)
	for d := range nd {
		s.lo[d], s.hi[d] = max(lo[d], p.lo[d]), min(hi[d], p.hi[d])
	}
	s.idx = append([]int64(nil), s.lo...)
	s.left = boxElems(s.lo, s.hi)
	s.check = p.hasCRC && slices.Equal(s.lo, p.lo) && slices.Equal(s.hi, p.hi)
	return s
}

// got adds bytes read from the source to the running CRC32 and checks it
// once the whole piece has been read.
func (s *pieceStream) got(b []byte) error {
	if !s.check {
		return nil
	}
	s.crc = ieeecrc.Update(s.crc, b)
	if s.left == 0 && s.srcLeft == 0 {
		if s.crc != s.p.crc {
			return fmt.Errorf("%w: CRC32 %08x, the zip record says %08x", ErrChunkCRC, s.crc, s.p.crc)
		}
		s.checked = true
	}
	return nil
}

// nextRun sets srcPos/srcLeft to the next run of consecutive storage bytes.
func (s *pieceStream) nextRun() bool {
	if s.left == 0 {
		return false
	}
	run := min(runLen(s.p, s.idx, s.lo, s.hi), s.left)
	s.srcPos = storagePos(s.p, s.idx) * s.es
	s.srcLeft = run * s.es
	advance(s.idx, s.lo, s.hi, run)
	s.left -= run
	return true
}

// read fills p (whose length never exceeds what the stream still holds).
func (s *pieceStream) read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if s.r < s.w {
			c := copy(p[n:], s.buf[s.r:s.w])
			s.r += c
			n += c
			continue
		}
		if s.srcLeft == 0 && !s.nextRun() {
			return n, io.ErrUnexpectedEOF
		}
		// Large reads with nothing buffered go straight to p.
		if s.p.swap == 0 && int64(len(p)-n) >= int64(s.bufSize) {
			k := min(int64(len(p)-n), s.srcLeft)
			if _, err := s.p.ra.ReadAt(p[n:n+int(k)], s.srcPos); err != nil {
				return n, err
			}
			s.srcPos += k
			s.srcLeft -= k
			if err := s.got(p[n : n+int(k)]); err != nil {
				return n, err
			}
			n += int(k)
			continue
		}
		if s.buf == nil {
			s.buf = make([]byte, s.bufSize)
		}
		k := min(int64(len(s.buf)), s.srcLeft)
		if _, err := s.p.ra.ReadAt(s.buf[:k], s.srcPos); err != nil {
			return n, err
		}
		s.srcPos += k
		s.srcLeft -= k
		if err := s.got(s.buf[:k]); err != nil {
			return n, err
		}
		if s.p.swap > 0 {
			SwapBytes(s.buf[:k], s.p.swap)
		}
		s.r, s.w = 0, int(k)
	}
	return n, nil
}

// The chunks of a DCP tensor (dcp.go opens them): what Tensor shows of
// them, and reading one whole to check every chunk's CRC32.

// Chunk is one piece of a tensor of a DCP checkpoint: the box
// [Offsets, Offsets+Sizes) of the global tensor, saved as a torch.save
// file (or a safetensors tensor) at bytes [Begin, Begin+Length) of File.
type Chunk struct {
	Offsets []int64
	Sizes   []int64
	File    string // file name, relative to the checkpoint directory
	Rank    int    // the rank that wrote File (dcp.RankOf, dcp.ShardFileRank), -1 when the name does not say
	Begin   int64
	Length  int64
}

// Chunks returns the chunks a DCP tensor is assembled from (replicated
// duplicates removed), nil for a tensor of any other format.
func (t *Tensor) Chunks() []Chunk {
	if dt := t.dcpTensor(); dt != nil {
		return dt.chunks
	}
	return nil
}

// Problem returns why a DCP tensor cannot be read (a dcp.ErrTiling or
// ErrMissingRecord error: a gap, an overlap, a chunk outside the shape, a
// missing file), nil when it can or for other formats.
func (t *Tensor) Problem() error {
	if dt := t.dcpTensor(); dt != nil {
		return dt.problem
	}
	return nil
}

func (t *Tensor) dcpTensor() *dcpTensor {
	if t.Storage == nil {
		return nil
	}
	if g, ok := t.Storage.src.(*gatherSource); ok {
		return g.g.dcp
	}
	return nil
}

// VerifyChunks reads a DCP tensor whole, checking the CRC32 of every
// chunk whose torch.save zip recorded one for exactly its bytes, and
// returns how many it checked. A mismatch is an ErrChunkCRC error naming
// the file; for other tensors it reads nothing and returns 0, nil.
func (t *Tensor) VerifyChunks(ctx context.Context) (int, error) {
	if t.Chunks() == nil {
		return 0, nil
	}
	if err := t.Problem(); err != nil {
		return 0, &Error{File: t.Storage.File, Tensor: t.Name, Err: err}
	}
	src := t.Storage.src.(*gatherSource)
	rc, err := src.g.stream(src.lo, src.hi)
	if err != nil {
		return 0, &Error{File: t.Storage.File, Tensor: t.Name, Err: err}
	}
	defer rc.Close()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, err := rc.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := 0
	for _, ps := range rc.(*boxStream).subs {
		if ps != nil && ps.checked {
			n++
		}
	}
	return n, nil
}
