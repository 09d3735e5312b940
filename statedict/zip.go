package statedict

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
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
	for i, f := range zr.File {
		if i%1024 == 0 {
			if err := cfg.canceled(); err != nil {
				return nil, err
			}
		}
		// Names are compared as torch's zip reader compares them
		// (ZipRecordKey): archive/DATA.PKL is data.pkl to torch.
		if rest, ok := strings.CutPrefix(ZipRecordKey(f.Name), ZipRecordKey(prefix)+"/"); ok {
			if _, dup := files[rest]; dup {
				return nil, &Error{Record: f.Name, Err: fmt.Errorf("%w: duplicate zip entry: two records of one name (torch compares names without regard to case), only one of which torch would read", ErrMalformed)}
			}
			files[rest] = f
		}
	}
	ck := &Checkpoint{Format: FormatTorchZip, ByteOrder: "little"}
	if _, ok := files["constants.pkl"]; ok {
		ck.Warnings = append(ck.Warnings, "this is a TorchScript archive (torch.jit.save): only its data.pkl tensors are read, not its code; tensors that are plain attributes (not parameters or buffers) are flagged attr")
	}
	small := func(name string) (string, bool, error) {
		f, ok := files[name]
		if !ok {
			return "", false, nil
		}
		b, err := readRecord(f, 4096, size)
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
	pf, ok := files["data.pkl"]
	pklName := prefix + "/data.pkl"
	if ok {
		pklName = pf.Name
	}
	if !ok {
		return nil, &Error{Record: pklName, Err: fmt.Errorf("%w: no data.pkl in the archive", ErrMissingRecord)}
	}
	data, err := readRecord(pf, cfg.maxPickle, size)
	if err != nil {
		return nil, &Error{Record: pklName, Err: err}
	}
	used := make(map[string]*Storage)
	spans := []recordSpan{}
	guard := &spanGuard{}
	if off, err := pf.DataOffset(); err == nil {
		spans = append(spans, recordSpan{name: pklName, begin: off, end: off + int64(min(pf.CompressedSize64, 1<<62))})
	}
	load := func(pid any) (any, error) {
		ref, err := pickle.ParseStoragePID(pid)
		if err != nil {
			return nil, err
		}
		if ref.View != nil {
			return nil, fmt.Errorf("%w: storage %s: view metadata (torch < 0.4's legacy format) in a zip checkpoint", ErrMalformed, ref.Key)
		}
		if s, ok := used[ref.Key]; ok {
			ref.Ref = s
			return ref, nil
		}
		rec := "data/" + ref.Key
		f, ok := files[ZipRecordKey(rec)]
		if !ok {
			return nil, &Error{Record: prefix + "/" + rec, Err: fmt.Errorf("%w: storage %s is referenced by data.pkl but not in the archive", ErrMissingRecord, ref.Key)}
		}
		s, err := newStorage(ref, f.Name, int64(f.UncompressedSize64))
		if err != nil {
			return nil, err
		}
		s.BigEndian = ck.ByteOrder == "big"
		s.CRC32 = f.CRC32
		s.HasCRC = f.CRC32 != 0 || f.UncompressedSize64 == 0
		switch declared := ref.Numel * int64(max(s.DType.Size(), 1)); {
		case s.NBytes < declared:
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("record %s holds %d bytes, storage %s declares %d", s.Record, s.NBytes, s.Key, declared))
		case int64(f.UncompressedSize64) > declared:
			// torch.save writes exactly the storage's bytes. The extra
			// bytes are ignored, as torch.load ignores them; the CRC32
			// covers them, so it cannot be checked over the storage (a
			// check would report damage that is not there).
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("record %s holds %d bytes, more than the %d that storage %s declares: the extra bytes are ignored and the record's CRC32, which covers them, is not checked",
				s.Record, f.UncompressedSize64, declared, s.Key))
			s.HasCRC = false
		}
		var lazy *spanGuard
		if cfg.fs != nil && f.Method == zip.Store {
			lazy = guard
		}
		if s.src, err = zipSource(r, size, f, ck, cfg, lazy, s.Record); err != nil {
			return nil, &Error{Record: s.Record, Err: err}
		}
		if lazy == nil {
			off, err := f.DataOffset()
			if err != nil {
				return nil, &Error{Record: s.Record, Err: fmt.Errorf("%w: %v", ErrMalformed, err)}
			}
			spans = append(spans, recordSpan{name: s.Record, begin: off, end: off + int64(min(f.CompressedSize64, 1<<62))})
		}
		used[ref.Key] = s
		ref.Ref = s
		return ref, nil
	}
	root, err := pickle.Unpickle(data, pickle.WithPersistentLoad(load), pickle.WithLimits(cfg.limits), pickle.WithContext(cfg.ctx))
	if err != nil {
		return nil, pickleError(pklName, err)
	}
	ck.Root = root
	if err := checkRecordOverlaps(spans); err != nil {
		return nil, err
	}
	guard.seed(spans)
	bld := newBuilder(ck, pklName, cfg, int64(len(data)))
	if _, ok := files["constants.pkl"]; ok {
		bld.script = readScriptClasses(files, size)
	}
	if err := bld.walk(root, "", false); err != nil {
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
	keys := make(map[string]bool, len(used))
	for k := range used {
		keys[ZipRecordKey(k)] = true
	}
	n := 0
	for name := range files {
		if key, ok := strings.CutPrefix(name, "data/"); ok && !strings.Contains(key, "/") {
			if !keys[key] {
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
		dt, ok := dtype.Parse(ref.DType)
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

// With a guard (files read over a network), a stored record's place in the
// file is found on its first read and registered with guard then, under
// name, instead of at open.
func zipSource(r io.ReaderAt, size int64, f *zip.File, ck *Checkpoint, cfg *config, guard *spanGuard, name string) (storageSource, error) {
	switch f.Method {
	case zip.Store:
		n := int64(f.UncompressedSize64)
		if f.CompressedSize64 != f.UncompressedSize64 || n < 0 || n > size {
			return nil, fmt.Errorf("%w: record of %d bytes runs past the end of the %d-byte file", ErrTruncated, n, size)
		}
		if guard != nil {
			// Over a network every local header is a round trip:
			// found when the data is first read, not at open, so that
			// opening costs the zip directory and the pickle only. The
			// record's bytes are checked against the others' then.
			return &lazyZipSource{r: r, size: size, f: f, guard: guard, name: name}, nil
		}
		return storedSource(r, size, f)
	case zip.Deflate:
		// Readers size buffers by the record's declared size: a claim
		// the compressed bytes cannot back (8 GiB from 48 bytes) is
		// refused before anything is allocated from it.
		if lim := maxInflated(f.CompressedSize64); f.UncompressedSize64 > lim {
			return nil, fmt.Errorf("%w: deflated record claims %d bytes from %d compressed bytes, more than deflate can produce (%d)",
				ErrMalformed, f.UncompressedSize64, f.CompressedSize64, lim)
		}
		return &zipDeflateSource{f: f, tempDir: cfg.tempDir, ck: ck, ctx: cfg.ctx}, nil
	}
	return nil, fmt.Errorf("%w: zip compression method %d (only stored and deflated are read)", ErrUnsupported, f.Method)
}

// maxInflated is the most bytes n deflated bytes can expand to: deflate's
// best ratio is 1032:1 (a 258-byte match in two bits), plus a margin for
// block headers.
func maxInflated(n uint64) uint64 {
	if n > 1<<50 {
		return 1 << 62
	}
	return n*1032 + 64<<10
}

// readRecord reads a whole zip record into memory, refusing records larger
// than max. The buffer is allocated once, at the record's declared size,
// and only once that size is known to be backed by the file's bytes: a
// stored record's claim cannot exceed the file (of fileSize bytes), a
// deflated one's cannot exceed what its compressed bytes can produce.
func readRecord(f *zip.File, max, fileSize int64) ([]byte, error) {
	claim := f.UncompressedSize64
	if claim > uint64(max) {
		return nil, fmt.Errorf("%w: record of %d bytes exceeds the limit of %d", ErrMalformed, claim, max)
	}
	switch {
	case f.Method == zip.Store && claim > uint64(fileSize):
		return nil, fmt.Errorf("%w: record of %d bytes in a %d-byte file", ErrTruncated, claim, fileSize)
	case f.Method == zip.Deflate && claim > maxInflated(f.CompressedSize64):
		return nil, fmt.Errorf("%w: deflated record claims %d bytes from %d compressed bytes, more than deflate can produce", ErrMalformed, claim, f.CompressedSize64)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	defer rc.Close()
	b := make([]byte, claim)
	_, err = io.ReadFull(rc, b)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %v", ErrTruncated, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	// Reading on to the end lets archive/zip check the record's CRC32.
	var one [1]byte
	if n, err := rc.Read(one[:]); n > 0 || err != io.EOF {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("record holds more than its declared %d bytes", claim)
		}
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return b, nil
}

// recordSpan is where a zip record's (compressed) bytes lie in the file.
type recordSpan struct {
	name       string
	begin, end int64
}

// checkRecordOverlaps refuses records whose bytes overlap: torch.save never
// writes such an archive, and a central directory pointing many entries at
// one record multiplies what is read and written (as Go's archive/zip
// documentation warns its users). Empty records overlap nothing.
func checkRecordOverlaps(spans []recordSpan) error {
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var last *recordSpan
	for i := range spans {
		s := &spans[i]
		if s.end <= s.begin {
			continue
		}
		if last != nil && s.begin < last.end {
			return &Error{Record: s.name, Err: fmt.Errorf("%w: records %s and %s share bytes %d-%d of the file (overlapping or aliased zip entries)",
				ErrMalformed, last.name, s.name, s.begin, min(s.end, last.end))}
		}
		if last == nil || s.end > last.end {
			last = s
		}
	}
	return nil
}

// spanGuard holds the records' byte ranges known so far, sorted and
// disjoint, for records whose place in the file is found only when they
// are first read (lazyZipSource): a record that shares bytes with one
// already known is refused then, as checkRecordOverlaps refuses it at
// open for local files.
type spanGuard struct {
	mu    sync.Mutex
	spans []recordSpan
}

// seed takes the spans checkRecordOverlaps has sorted and found disjoint.
func (g *spanGuard) seed(spans []recordSpan) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range spans {
		if s.end > s.begin {
			g.spans = append(g.spans, s)
		}
	}
}

// add registers s, or reports the record it overlaps.
func (g *spanGuard) add(s recordSpan) error {
	if s.end <= s.begin {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i := sort.Search(len(g.spans), func(i int) bool { return g.spans[i].begin >= s.begin })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(g.spans) {
			continue
		}
		o := g.spans[j]
		if o.name == s.name && o.begin == s.begin && o.end == s.end {
			return nil
		}
		if s.begin < o.end && o.begin < s.end {
			return fmt.Errorf("%w: records %s and %s share bytes %d-%d of the file (overlapping or aliased zip entries)",
				ErrMalformed, o.name, s.name, max(s.begin, o.begin), min(s.end, o.end))
		}
	}
	g.spans = append(g.spans, recordSpan{})
	copy(g.spans[i+1:], g.spans[i:])
	g.spans[i] = s
	return nil
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
	r     io.ReaderAt
	size  int64
	f     *zip.File
	guard *spanGuard
	name  string

	once sync.Once
	src  *sectionSource
	err  error
}

func (s *lazyZipSource) resolve() (*sectionSource, error) {
	s.once.Do(func() {
		s.src, s.err = storedSource(s.r, s.size, s.f)
		if s.err == nil {
			s.err = s.guard.add(recordSpan{name: s.name, begin: s.src.off, end: s.src.off + s.src.n})
		}
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
