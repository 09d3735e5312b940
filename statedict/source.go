package statedict

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/ckpt-dev/ckpt/torchzip"
)

// sectionSource serves a storage stored uncompressed at [off, off+n) of r.
type sectionSource struct {
	r      io.ReaderAt
	off, n int64
}

func (s *sectionSource) open(off, n int64) (io.ReadCloser, error) {
	return sectionReadCloser{io.NewSectionReader(s.r, s.off+off, n)}, nil
}

// sectionReadCloser is a section of the file read in place: a reader that
// also offers random access (io.ReaderAt), so that a caller filling a
// buffer can ask for large ranges at once (an object store then fetches
// them with parallel ranged GETs). Close does nothing.
type sectionReadCloser struct{ *io.SectionReader }

func (sectionReadCloser) Close() error { return nil }

// ReadAtPieces reads len(p) bytes at off of the section as ReadAt does,
// calling landed with each piece as its bytes are final. It forwards to
// the file's reader when that is a PieceReaderAt (an object store reports
// each piece of each request as it arrives), and otherwise reports all of
// p once read.
func (s sectionReadCloser) ReadAtPieces(p []byte, off int64, landed func(piece []byte, off int64)) (int, error) {
	outer, base, size := s.Outer()
	pr, ok := outer.(PieceReaderAt)
	if !ok || off < 0 || off >= size {
		n, err := s.ReadAt(p, off)
		if n > 0 && (err == nil || err == io.EOF) {
			landed(p[:n], off)
		}
		return n, err
	}
	var eof error
	if int64(len(p)) > size-off {
		p, eof = p[:size-off], io.EOF
	}
	n, err := pr.ReadAtPieces(p, base+off, func(piece []byte, at int64) { landed(piece, at-base) })
	if err == nil {
		err = eof
	}
	return n, err
}

func (s *sectionSource) readerAt() (io.ReaderAt, error) {
	return io.NewSectionReader(s.r, s.off, s.n), nil
}

// zipDeflateSource serves a deflated zip record: sequential reads stream
// through the decompressor; random access spools the record to an unlinked
// temporary file once.
type zipDeflateSource struct {
	rec     *torchzip.Record
	tempDir string
	ck      *Checkpoint     // owns the spool file
	ctx     context.Context // stops the spooling; nil: never

	once  sync.Once
	spool *os.File
	err   error
}

func (s *zipDeflateSource) open(off, n int64) (io.ReadCloser, error) {
	if s.spool != nil {
		return sectionReadCloser{io.NewSectionReader(s.spool, off, n)}, nil
	}
	rc, err := s.rec.Open()
	if err != nil {
		return nil, err
	}
	if _, err := io.CopyN(io.Discard, rc, off); err != nil {
		rc.Close()
		return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, n), rc}, nil
}

func (s *zipDeflateSource) readerAt() (io.ReaderAt, error) {
	s.once.Do(func() {
		rc, err := s.rec.Open()
		if err != nil {
			s.err = err
			return
		}
		defer rc.Close()
		s.spool, s.err = spoolToTemp(s.ctx, rc, s.tempDir, s.rec.Size())
		if s.err == nil {
			s.ck.closers = append(s.ck.closers, s.spool)
		}
	})
	return s.spool, s.err
}

// spoolToTemp copies at most max bytes of r into an unlinked temporary
// file, so that nothing is left behind however the process ends.
// It stops when ctx is done (nil: never).
func spoolToTemp(ctx context.Context, r io.Reader, dir string, max int64) (*os.File, error) {
	f, err := os.CreateTemp(dir, "ckpt-spool-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	if ctx != nil {
		r = ctxReader{ctx, r}
	}
	n, err := io.Copy(f, io.LimitReader(r, max+1))
	if err == nil && n > max {
		err = fmt.Errorf("%w: decompresses to more than %d bytes", ErrMalformed, max)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ctxReader fails reads once ctx is done, so that a long copy stops.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
