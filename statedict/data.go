package statedict

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt/internal/par"
)

// ErrNoData is returned when reading the data of a tensor saved without any
// (device "meta", or a tensor subclass with no storage).
var ErrNoData = errors.New("statedict: tensor has no data (meta tensor)")

// Open returns the storage's bytes in file order (see BigEndian), streaming:
// this works for every container without temporary files. Where the bytes
// are read in place (an uncompressed record or file), the reader also
// implements io.ReaderAt over the storage's bytes (offset 0 is its first
// byte), for callers that read large ranges at once.
func (s *Storage) Open() (io.ReadCloser, error) {
	if s.src == nil {
		return nil, ErrNoData
	}
	if err := s.checkSparse(); err != nil {
		return nil, err
	}
	return s.src.open(0, s.NBytes)
}

// OpenLittleEndian is Open with the bytes of a big-endian storage swapped
// to little-endian by its dtype's SwapUnit; for a little-endian storage it
// is Open.
func (s *Storage) OpenLittleEndian() (io.ReadCloser, error) {
	rc, err := s.Open()
	if err != nil || !s.BigEndian || s.DType.SwapUnit() < 2 {
		return rc, err
	}
	return buffered(&swapReader{rc: rc, unit: s.DType.SwapUnit()}), nil
}

// ReaderAt gives random access to the storage's bytes in file order.
// Uncompressed records are read in place; a deflated zip record is first
// decompressed to an unlinked temporary file. Like Open, it refuses the
// storage of a sparse tensor whose invariants do not hold (ErrInvalidSparse).
func (s *Storage) ReaderAt() (io.ReaderAt, error) {
	if s.src == nil {
		return nil, ErrNoData
	}
	if err := s.checkSparse(); err != nil {
		return nil, err
	}
	return s.src.readerAt()
}

// Span returns the byte range [begin, end) of the storage that the tensor's
// elements occupy.
func (t *Tensor) Span() (begin, end int64) {
	end, _ = extentBytes(t)
	if end == 0 {
		return 0, 0
	}
	return t.Offset * int64(t.DType.Size()), end
}

// Raw returns the bytes of the storage that the tensor spans, in file order
// and file byte order: for a contiguous tensor exactly its elements; for a
// strided view, everything between its first and last element.
func (t *Tensor) Raw() (*io.SectionReader, error) {
	if t.Storage == nil {
		return nil, &Error{Tensor: t.Name, Err: ErrNoData}
	}
	ra, err := t.Storage.ReaderAt()
	if err != nil {
		return nil, &Error{File: t.Storage.File, Record: t.Storage.Record, Tensor: t.Name, Err: err}
	}
	b, e := t.Span()
	return io.NewSectionReader(ra, b, e-b), nil
}

// Open returns the tensor's logical elements in C order, little-endian:
// exactly NBytes() bytes, whatever the offset, strides and byte order of the
// storage. This is what torch would hold after tensor.contiguous().
// Reading a storage that holds a component of a sparse tensor first checks
// the sparse tensor's invariants (indices in range, compressed indices from
// 0 to the number of entries, ...), as torch.load does: ErrInvalidSparse
// when they do not hold. Storage.Open and Storage.ReaderAt check the same.
func (t *Tensor) Open() (io.ReadCloser, error) {
	if t.Storage == nil {
		return nil, &Error{Tensor: t.Name, Err: ErrNoData}
	}
	if err := t.Storage.checkSparse(); err != nil {
		return nil, err
	}
	return t.openData()
}

// openData is Open without the sparse invariant check: only the check
// itself reads through it.
func (t *Tensor) openData() (io.ReadCloser, error) {
	if t.Storage == nil || t.Storage.src == nil {
		return nil, &Error{Tensor: t.Name, Err: ErrNoData}
	}
	swap := 0
	if t.Storage.BigEndian && t.DType.SwapUnit() > 1 {
		swap = t.DType.SwapUnit()
	}
	if t.IsContiguous() {
		b, e := t.Span()
		rc, err := t.Storage.src.open(b, e-b)
		if err != nil {
			return nil, &Error{File: t.Storage.File, Record: t.Storage.Record, Tensor: t.Name, Err: err}
		}
		if swap == 0 {
			return rc, nil
		}
		return buffered(&swapReader{rc: rc, unit: swap}), nil
	}
	ra, err := t.Storage.src.readerAt()
	if err != nil {
		return nil, &Error{File: t.Storage.File, Record: t.Storage.Record, Tensor: t.Name, Err: err}
	}
	return t.OpenFrom(ra), nil
}

// OpenFrom is Open over storage bytes the caller already has (file order
// and file byte order, as Storage.ReaderAt gives them; a copy in memory,
// say): the tensor's logical elements in C order, little-endian.
func (t *Tensor) OpenFrom(storage io.ReaderAt) io.ReadCloser {
	swap := 0
	if t.Storage != nil && t.Storage.BigEndian && t.DType.SwapUnit() > 1 {
		swap = t.DType.SwapUnit()
	}
	b, e := t.Span()
	raw := io.NewSectionReader(storage, b, e-b)
	return buffered(&stridedReader{t: t, raw: raw, swap: swap, idx: make([]int64, len(t.Shape)), left: t.NumEl()})
}

// buffered lets callers read any number of bytes at a time from readers
// that work in whole elements (they refuse buffers smaller than one).
func buffered(rc io.ReadCloser) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{bufio.NewReaderSize(rc, 64<<10), rc}
}

// ReadAll reads the tensor's logical elements into memory (see Open).
func (t *Tensor) ReadAll() ([]byte, error) {
	rc, err := t.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, t.NBytes())
	if _, err := io.ReadFull(rc, buf); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
		}
		// The reader's own error (a chunk's CRC32 mismatch, a failed
		// read) says what went wrong; keep it matchable.
		var e *Error
		if errors.As(err, &e) && e.Tensor != "" {
			return nil, err
		}
		return nil, &Error{Tensor: t.Name, Err: err}
	}
	return buf, nil
}

// swapReader byte-swaps groups of unit bytes as they stream through.
type swapReader struct {
	rc   io.ReadCloser
	unit int
	part []byte // a group split across reads
}

func (s *swapReader) Read(p []byte) (int, error) {
	if len(p) < s.unit {
		return 0, io.ErrShortBuffer
	}
	p = p[:len(p)/s.unit*s.unit]
	n := copy(p, s.part)
	s.part = s.part[:0]
	m, err := io.ReadAtLeast(s.rc, p[n:], 1)
	n += m
	whole := n / s.unit * s.unit
	s.part = append(s.part, p[whole:n]...)
	SwapBytes(p[:whole], s.unit)
	if err == io.EOF && len(s.part) > 0 {
		err = io.ErrUnexpectedEOF
	}
	return whole, err
}

func (s *swapReader) Close() error { return s.rc.Close() }

// SwapBytes reverses the byte order of every group of unit bytes of b, in
// place: big-endian elements become little-endian and back.
func SwapBytes(b []byte, unit int) {
	for i := 0; i+unit <= len(b); i += unit {
		g := b[i : i+unit]
		for l, r := 0, unit-1; l < r; l, r = l+1, r-1 {
			g[l], g[r] = g[r], g[l]
		}
	}
}

// stridedWindow is the most a stridedReader holds of its raw span at a
// time. A run of elements that fits in it is gathered from one read of
// the bytes it spans, kept for the runs after it: a transposed view (an
// expert weight [in, out] read as [out, in]) reads each source row band
// once instead of once per output row.
var stridedWindow int64 = 64 << 20

// stridedWindows keeps the windows between tensors: a fresh 64 MiB costs
// thousands of page faults.
var stridedWindows = par.FreeList[byte]{Max: 2}

// stridedReader gathers a non-contiguous tensor's elements in C order,
// reading the innermost dimension's run at a time from the raw span:
// a contiguous run straight into the caller's buffer, a strided one
// through a window of the span (stridedWindow).
type stridedReader struct {
	t      *Tensor
	raw    *io.SectionReader // starts at the tensor's first element
	swap   int
	idx    []int64 // index of the next element
	left   int64   // elements still to deliver
	win    *[]byte // the window's buffer (from stridedWindows)
	winOff int64   // raw offset of the window's first byte
	winLen int64   // bytes of the window read
}

// span returns the raw bytes [off, off+n) from the window, reading a new
// window that starts at off when they are not all in it.
func (s *stridedReader) span(off, n int64) ([]byte, error) {
	if off < s.winOff || off+n > s.winOff+s.winLen {
		size := max(n, min(stridedWindow, s.raw.Size()-off))
		if s.win == nil || int64(cap(*s.win)) < size {
			stridedWindows.Put(s.win)
			s.win = stridedWindows.Get(int(size))
		}
		buf := (*s.win)[:size]
		m, err := s.raw.ReadAt(buf, off)
		if int64(m) < n {
			s.winLen = 0
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		s.winOff, s.winLen = off, int64(m)
	}
	return (*s.win)[off-s.winOff : off-s.winOff+n], nil
}

func (s *stridedReader) Read(p []byte) (int, error) {
	es := int64(s.t.DType.Size())
	if s.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) < es {
		return 0, io.ErrShortBuffer
	}
	n := 0
	nd := len(s.idx)
	for s.left > 0 && int64(len(p)-n) >= es {
		// Element offset of idx relative to the tensor's first element.
		var off int64
		for d, i := range s.idx {
			off += i * s.t.Strides[d]
		}
		// Read as many elements of the innermost dimension as fit.
		run := int64(1)
		inner := int64(1)
		if nd > 0 {
			inner = s.t.Strides[nd-1]
			run = s.t.Shape[nd-1] - s.idx[nd-1]
		}
		run = min(run, int64(len(p)-n)/es, s.left)
		if inner == 1 {
			// A contiguous run (a row of a column slice, say): exactly
			// its bytes, read into p.
			if _, err := s.raw.ReadAt(p[n:int64(n)+run*es], off*es); err != nil {
				return n, fmt.Errorf("%w: %v", ErrTruncated, err)
			}
			n += int(run * es)
		} else {
			// Keep the bytes a run spans within one window.
			run = min(run, max(1, (stridedWindow/es-1)/inner+1))
			buf, err := s.span(off*es, ((run-1)*inner+1)*es)
			if err != nil {
				return n, err
			}
			for k := int64(0); k < run; k++ {
				copy(p[n:], buf[k*inner*es:k*inner*es+es])
				n += int(es)
			}
		}
		s.left -= run
		if nd > 0 {
			s.idx[nd-1] += run
			for d := nd - 1; d > 0 && s.idx[d] >= s.t.Shape[d]; d-- {
				s.idx[d] = 0
				s.idx[d-1]++
			}
		}
	}
	if s.swap > 0 {
		SwapBytes(p[:n], s.swap)
	}
	return n, nil
}

// Close gives the window back.
func (s *stridedReader) Close() error {
	stridedWindows.Put(s.win)
	s.win, s.winLen = nil, 0
	return nil
}
