package statedict

import (
	"io"
	"os"
)

// FileSpan is where bytes lie, unchanged, in a local file: len bytes at
// offset Off of File.
type FileSpan struct {
	// File is the checkpoint's open file; it stays open until the
	// Checkpoint is closed and must not be closed by the caller.
	File *os.File
	// Off and Len are the range's offset in File and its length.
	Off, Len int64
}

// InPlace reports where the tensor's logical elements (what Open returns)
// lie in a local file, byte for byte: for a contiguous tensor whose
// storage is read in place from an *os.File (a stored zip record, a
// legacy, tar, safetensors or GGUF file) and needs no byte swap. A caller
// may then copy the bytes without reading them (copy_file_range); the
// checksums that cover them (Storage.CRC32, recorded digests) are still
// the caller's to check. ok is false for everything else: a compressed
// record, a file reached through an object store or a file system of
// Option WithFS, a strided view, a big-endian storage, no data. Like
// Open, it refuses the storage of a sparse tensor whose invariants do
// not hold (ErrInvalidSparse).
func (t *Tensor) InPlace() (span FileSpan, ok bool, err error) {
	if t.Storage == nil || !t.IsContiguous() || t.Storage.BigEndian && t.DType.SwapUnit() > 1 {
		return FileSpan{}, false, nil
	}
	b, e := t.Span()
	return t.Storage.inPlace(b, e-b)
}

// InPlace is Tensor.InPlace for the storage's bytes (what Open returns).
func (s *Storage) InPlace() (span FileSpan, ok bool, err error) {
	return s.inPlace(0, s.NBytes)
}

// inPlace locates [off, off+n) of the storage's bytes in its file.
func (s *Storage) inPlace(off, n int64) (FileSpan, bool, error) {
	r, base, ok, err := s.outerSpan(off, n)
	if !ok || err != nil {
		return FileSpan{}, false, err
	}
	f, isFile := r.(*os.File)
	if !isFile {
		return FileSpan{}, false, nil
	}
	return FileSpan{File: f, Off: base, Len: n}, true, nil
}

// outerSpan locates [off, off+n) of the storage's bytes in the reader
// under every section of the file that holds them: the reader and the
// range's offset there. ok is false where the storage is not stored in
// place (compressed, derived) or the range lies outside it. A stored zip
// record read over a network has its local header read here, if no read
// has yet.
func (s *Storage) outerSpan(off, n int64) (r io.ReaderAt, base int64, ok bool, err error) {
	src, isSection := s.src.(*sectionSource)
	if lz, isLazy := s.src.(*lazyZipSource); isLazy {
		if src, err = lz.resolve(); err != nil {
			return nil, 0, false, err
		}
		isSection = true
	}
	if !isSection || off < 0 || n < 0 || off+n > src.n {
		return nil, 0, false, nil
	}
	if err := s.checkSparse(); err != nil {
		return nil, 0, false, err
	}
	r, base = src.r, src.off+off
	for {
		sr, isSR := r.(*io.SectionReader)
		if !isSR {
			return r, base, true, nil
		}
		outer, o, size := sr.Outer()
		if base+n > size {
			return nil, 0, false, nil
		}
		r, base = outer, o+base
	}
}
