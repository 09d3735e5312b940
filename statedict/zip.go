package statedict

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/pickle"
)

// readZip reads torch's zip format (torch.save since 1.6): one top folder
// holding data.pkl, data/<key> records, version and (torch >= 2.1) byteorder.
func readZip(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		if errors.Is(err, zip.ErrFormat) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w: not a readable zip (%v); the file may be cut short", ErrTruncated, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(zr.File) == 0 {
		return nil, fmt.Errorf("%w: empty zip archive", ErrMalformed)
	}
	prefix, _, ok := strings.Cut(zr.File[0].Name, "/")
	if !ok {
		return nil, &Error{Record: zr.File[0].Name, Err: fmt.Errorf("%w: zip entries are not under a top folder as torch.save writes them", ErrFormat)}
	}
	files := make(map[string]*zip.File, len(zr.File))
	for _, f := range zr.File {
		if rest, ok := strings.CutPrefix(f.Name, prefix+"/"); ok {
			files[rest] = f
		}
	}
	ck := &Checkpoint{Format: FormatTorchZip, ByteOrder: "little"}
	if _, ok := files["constants.pkl"]; ok {
		ck.Warnings = append(ck.Warnings, "this is a TorchScript archive (torch.jit.save): only its data.pkl tensors are read, not its code")
	}
	small := func(name string) (string, bool, error) {
		f, ok := files[name]
		if !ok {
			return "", false, nil
		}
		b, err := readRecord(f, 4096)
		return strings.TrimSpace(string(b)), true, err
	}
	if v, ok, err := small("version"); err != nil {
		return nil, &Error{Record: prefix + "/version", Err: err}
	} else if ok {
		ck.Version = v
	} else if v, ok, err := small(".data/version"); err != nil {
		return nil, &Error{Record: prefix + "/.data/version", Err: err}
	} else if ok {
		ck.Version = v
	}
	if bo, ok, err := small("byteorder"); err != nil {
		return nil, &Error{Record: prefix + "/byteorder", Err: err}
	} else if ok {
		if bo != "little" && bo != "big" {
			return nil, &Error{Record: prefix + "/byteorder", Err: fmt.Errorf("%w: byte order %q (want little or big)", ErrMalformed, bo)}
		}
		ck.ByteOrder = bo
	}
	pklName := prefix + "/data.pkl"
	pf, ok := files["data.pkl"]
	if !ok {
		return nil, &Error{Record: pklName, Err: fmt.Errorf("%w: no data.pkl in the archive", ErrMissingRecord)}
	}
	data, err := readRecord(pf, cfg.maxPickle)
	if err != nil {
		return nil, &Error{Record: pklName, Err: err}
	}
	used := make(map[string]*Storage)
	load := func(pid any) (any, error) {
		ref, err := pickle.ParseStoragePID(pid)
		if err != nil {
			return nil, err
		}
		if s, ok := used[ref.Key]; ok {
			ref.Ref = s
			return ref, nil
		}
		rec := "data/" + ref.Key
		f, ok := files[rec]
		if !ok {
			return nil, &Error{Record: prefix + "/" + rec, Err: fmt.Errorf("%w: storage %s is referenced by data.pkl but not in the archive", ErrMissingRecord, ref.Key)}
		}
		s, err := newStorage(ref, prefix+"/"+rec, int64(f.UncompressedSize64))
		if err != nil {
			return nil, err
		}
		if declared := ref.Numel * int64(max(s.DType.Size(), 1)); s.NBytes < declared {
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("record %s holds %d bytes, storage %s declares %d", s.Record, s.NBytes, s.Key, declared))
		}
		s.BigEndian = ck.ByteOrder == "big"
		s.CRC32 = f.CRC32
		s.HasCRC = f.CRC32 != 0 || f.UncompressedSize64 == 0
		if s.src, err = zipSource(r, size, f, ck, cfg); err != nil {
			return nil, &Error{Record: s.Record, Err: err}
		}
		used[ref.Key] = s
		ref.Ref = s
		return ref, nil
	}
	root, err := pickle.Unpickle(data, pickle.WithPersistentLoad(load), pickle.WithLimits(cfg.limits))
	if err != nil {
		return nil, pickleError(pklName, err)
	}
	ck.Root = root
	if err := newBuilder(ck, pklName).walk(root, "", false); err != nil {
		return nil, err
	}
	if n := countUnused(files, used); n > 0 {
		ck.Warnings = append(ck.Warnings, fmt.Sprintf("%d storage record(s) under data/ are not referenced by data.pkl", n))
	}
	return ck, nil
}

// pickleError attaches the record to an unpickling error, keeping an inner
// *Error (from a storage lookup) as it is.
func pickleError(record string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Record: record, Err: err}
}

func countUnused(files map[string]*zip.File, used map[string]*Storage) int {
	n := 0
	for name := range files {
		if key, ok := strings.CutPrefix(name, "data/"); ok && !strings.Contains(key, "/") {
			if _, ok := used[key]; !ok {
				n++
			}
		}
	}
	return n
}

// newStorage makes the storage a persistent id describes. A record shorter
// than the declared size (recordSize bytes) keeps only what the record holds:
// the tensors reaching past it fail by name when they are built.
func newStorage(ref *pickle.StorageRef, record string, recordSize int64) (*Storage, error) {
	s := &Storage{Key: ref.Key, Location: ref.Location, Record: record}
	elem := int64(1)
	if ref.DType != "" {
		dt, ok := ParseDType(ref.DType)
		if !ok {
			return nil, &Error{Record: record, Err: fmt.Errorf("%w: storage class %s", ErrMalformed, ref.Class)}
		}
		s.DType = dt
		elem = int64(dt.Size())
	}
	hi, lo := bits.Mul64(uint64(ref.Numel), uint64(elem))
	if ref.Numel < 0 || hi != 0 || lo >= 1<<62 {
		return nil, &Error{Record: record, Err: fmt.Errorf("%w: storage %s of %d elements", ErrOverflow, ref.Key, ref.Numel)}
	}
	s.NBytes = min(int64(lo), recordSize)
	return s, nil
}

func zipSource(r io.ReaderAt, size int64, f *zip.File, ck *Checkpoint, cfg *config) (storageSource, error) {
	switch f.Method {
	case zip.Store:
		n := int64(f.UncompressedSize64)
		if f.CompressedSize64 != f.UncompressedSize64 || n < 0 || n > size {
			return nil, fmt.Errorf("%w: record of %d bytes runs past the end of the %d-byte file", ErrTruncated, n, size)
		}
		if cfg.fs != nil {
			// Over a network every local header is a round trip:
			// found when the data is first read, not at open, so that
			// opening costs the zip directory and the pickle only.
			return &lazyZipSource{r: r, size: size, f: f}, nil
		}
		return storedSource(r, size, f)
	case zip.Deflate:
		return &zipDeflateSource{f: f, tempDir: cfg.tempDir, ck: ck}, nil
	}
	return nil, fmt.Errorf("%w: zip compression method %d (only stored and deflated are read)", ErrUnsupported, f.Method)
}

// readRecord reads a whole zip record into memory, refusing records larger
// than max.
func readRecord(f *zip.File, max int64) ([]byte, error) {
	if f.UncompressedSize64 > uint64(max) {
		return nil, fmt.Errorf("%w: record of %d bytes exceeds the limit of %d", ErrMalformed, f.UncompressedSize64, max)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, int64(f.UncompressedSize64)))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b, nil
}

// storedSource serves a stored zip record in place, after reading its
// local header for the data offset.
func storedSource(r io.ReaderAt, size int64, f *zip.File) (*sectionSource, error) {
	off, err := f.DataOffset()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	n := int64(f.UncompressedSize64)
	if off < 0 || off > size || n > size-off {
		return nil, fmt.Errorf("%w: record of %d bytes at offset %d runs past the end of the %d-byte file", ErrTruncated, n, off, size)
	}
	return &sectionSource{r: r, off: off, n: n}, nil
}

// lazyZipSource is a stored record whose local header is read on first
// use.
type lazyZipSource struct {
	r    io.ReaderAt
	size int64
	f    *zip.File

	once sync.Once
	src  *sectionSource
	err  error
}

func (s *lazyZipSource) resolve() (*sectionSource, error) {
	s.once.Do(func() {
		s.src, s.err = storedSource(s.r, s.size, s.f)
		if s.err != nil {
			s.err = &Error{Record: s.f.Name, Err: s.err}
		}
	})
	return s.src, s.err
}

func (s *lazyZipSource) open(off, n int64) (io.ReadCloser, error) {
	src, err := s.resolve()
	if err != nil {
		return nil, err
	}
	return src.open(off, n)
}

func (s *lazyZipSource) readerAt() (io.ReaderAt, error) {
	src, err := s.resolve()
	if err != nil {
		return nil, err
	}
	return src.readerAt()
}
