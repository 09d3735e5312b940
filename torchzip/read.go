package torchzip

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Reader reads the container of a torch zip archive (torch.save since
// 1.6, TorchScript): the records under the one top folder that the first
// record names, looked up as torch's zip reader looks them up
// (RecordKey), where each record's bytes lie, and their CRC32s. What the
// records mean (data.pkl's object tree, the storages it references) is
// its caller's: package statedict.
type Reader struct {
	r       io.ReaderAt
	size    int64
	prefix  string
	records map[string]*Record // by the RecordKey of the name under prefix
}

// Record is one record of a Reader's archive.
type Record struct {
	f    *zip.File
	r    io.ReaderAt
	size int64 // of the archive

	spanOnce sync.Once
	span     Span
	spanErr  error
}

// ReadOption configures NewReader.
type ReadOption func(*readConfig)

type readConfig struct{ ctx context.Context }

// WithContext stops NewReader's walk of a large directory when ctx is done.
func WithContext(ctx context.Context) ReadOption { return func(c *readConfig) { c.ctx = ctx } }

// NewReader reads the zip directory of the archive r of size bytes. It
// fails with ErrTruncated or ErrMalformed for a zip it cannot read, an
// ErrNotTorchZip *RecordError when the first record is not under a top
// folder, and an ErrMalformed *RecordError for two records torch would
// take for one.
func NewReader(r io.ReaderAt, size int64, opts ...ReadOption) (*Reader, error) {
	cfg := readConfig{ctx: context.Background()}
	for _, o := range opts {
		o(&cfg)
	}
	zr, err := zip.NewReader(&headerWindow{r: r, size: size}, size)
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
		return nil, &RecordError{Name: zr.File[0].Name, Err: fmt.Errorf("%w: zip entries are not under a top folder as torch.save writes them", ErrNotTorchZip)}
	}
	z := &Reader{r: r, size: size, prefix: prefix, records: make(map[string]*Record, len(zr.File))}
	for i, f := range zr.File {
		if i%1024 == 0 {
			if err := cfg.ctx.Err(); err != nil {
				return nil, err
			}
		}
		// Names are compared as torch's zip reader compares them
		// (RecordKey): archive/DATA.PKL is data.pkl to torch.
		if rest, ok := strings.CutPrefix(RecordKey(f.Name), RecordKey(prefix)+"/"); ok {
			if _, dup := z.records[rest]; dup {
				return nil, &RecordError{Name: f.Name, Err: fmt.Errorf("%w: duplicate zip entry: two records of one name (torch compares names without regard to case), only one of which torch would read", ErrMalformed)}
			}
			z.records[rest] = &Record{f: f, r: r, size: size}
		}
	}
	return z, nil
}

// RecordKey is how torch's zip reader compares record names: miniz
// looks names up without MZ_ZIP_FLAG_CASE_SENSITIVE, folding ASCII
// letters only. Two records with one key are one record to torch, which
// may open either.
func RecordKey(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, name)
}

// IsPickleRecord reports whether a loader unpickles the zip record name:
// data.pkl (torch.load, torch.jit.load), constants.pkl and the
// *.debug_pkl records of TorchScript, a torch.package's pickles; compared
// as torch compares names (RecordKey).
func IsPickleRecord(name string) bool {
	k := RecordKey(name)
	return strings.HasSuffix(k, ".pkl") || strings.HasSuffix(k, "_pkl")
}

// Prefix returns the archive's top folder ("archive" for torch.save to a
// file object).
func (z *Reader) Prefix() string { return z.prefix }

// Size returns the archive's size.
func (z *Reader) Size() int64 { return z.size }

// Record returns the record name ("data.pkl", "data/0") of the top
// folder, looked up by RecordKey.
func (z *Reader) Record(name string) (*Record, bool) {
	rec, ok := z.records[RecordKey(name)]
	return rec, ok
}

// Keys returns the RecordKey of every record under the top folder,
// relative to it, sorted.
func (z *Reader) Keys() []string {
	keys := make([]string, 0, len(z.records))
	for k := range z.records {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Name returns the record's full name in the archive ("archive/data/0").
func (rec *Record) Name() string { return rec.f.Name }

// Size returns the record's uncompressed size, as the directory declares it.
func (rec *Record) Size() int64 { return int64(min(rec.f.UncompressedSize64, 1<<62)) }

// CRC32 returns the CRC32 the directory records for the record's bytes;
// ok is false when it records none (a zero CRC32 of a non-empty record).
func (rec *Record) CRC32() (crc uint32, ok bool) {
	return rec.f.CRC32, rec.f.CRC32 != 0 || rec.f.UncompressedSize64 == 0
}

// Stored reports whether the record is stored uncompressed (its bytes
// lie in place in the archive: Data); otherwise it is deflated (Open).
func (rec *Record) Stored() bool { return rec.f.Method == zip.Store }

// Check refuses a record this package cannot serve: a compression method
// other than stored and deflated (ErrUnsupported), a stored record larger
// than the archive (ErrTruncated), a deflated one claiming more bytes
// than its compressed bytes can produce (ErrMalformed): readers size
// buffers by the declared size, so a claim the bytes cannot back (8 GiB
// from 48 bytes) is refused before anything is allocated from it.
func (rec *Record) Check() error {
	f := rec.f
	switch f.Method {
	case zip.Store:
		n := int64(f.UncompressedSize64)
		if f.CompressedSize64 != f.UncompressedSize64 || n < 0 || n > rec.size {
			return fmt.Errorf("%w: record of %d bytes runs past the end of the %d-byte file", ErrTruncated, n, rec.size)
		}
		return nil
	case zip.Deflate:
		if lim := maxInflated(f.CompressedSize64); f.UncompressedSize64 > lim {
			return fmt.Errorf("%w: deflated record claims %d bytes from %d compressed bytes, more than deflate can produce (%d)",
				ErrMalformed, f.UncompressedSize64, f.CompressedSize64, lim)
		}
		return nil
	}
	return fmt.Errorf("%w: zip compression method %d (only stored and deflated are read)", ErrUnsupported, f.Method)
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

// Open returns a reader of the record's uncompressed bytes; reading it to
// the end checks the CRC32.
func (rec *Record) Open() (io.ReadCloser, error) { return rec.f.Open() }

// ReadAll reads the whole record into memory, refusing records larger
// than max. The buffer is allocated once, at the record's declared size,
// and only once that size is known to be backed by the file's bytes: a
// stored record's claim cannot exceed the archive, a deflated one's
// cannot exceed what its compressed bytes can produce. The CRC32 is
// checked.
func (rec *Record) ReadAll(max int64) ([]byte, error) {
	f := rec.f
	claim := f.UncompressedSize64
	if claim > uint64(max) {
		return nil, fmt.Errorf("%w: record of %d bytes exceeds the limit of %d", ErrMalformed, claim, max)
	}
	switch {
	case f.Method == zip.Store && claim > uint64(rec.size):
		return nil, fmt.Errorf("%w: record of %d bytes in a %d-byte file", ErrTruncated, claim, rec.size)
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

// Span returns where the record's (compressed) bytes lie in the archive,
// reading its local header the first time (one read: a round trip over a
// network).
func (rec *Record) Span() (Span, error) {
	rec.spanOnce.Do(func() {
		off, err := rec.f.DataOffset()
		if err != nil {
			rec.spanErr = fmt.Errorf("%w: %v", ErrMalformed, err)
			return
		}
		rec.span = Span{Name: rec.f.Name, Begin: off, End: off + int64(min(rec.f.CompressedSize64, 1<<62))}
	})
	return rec.span, rec.spanErr
}

// prefetchWorkers is how many local headers PrefetchSpans reads at once.
const prefetchWorkers = 16

// PrefetchSpans reads the local headers of the records whose names start
// with prefix (under the top folder: "data/" for a checkpoint's storages)
// from several goroutines at once, so that their Span is known before it
// is asked for. On a disk, where a record's header lies megabytes from the
// next one's, reading them one after another waits for one read at a time:
// the 250 headers of a 1 GB torch.save took 70 ms from a cold page cache
// (docs/benchmarks.md); at once the disk serves them together. An error is
// left for Span to report. It stops early when ctx is done.
func (z *Reader) PrefetchSpans(ctx context.Context, prefix string) {
	key := RecordKey(prefix)
	var recs []*Record
	for k, rec := range z.records {
		if strings.HasPrefix(k, key) {
			recs = append(recs, rec)
		}
	}
	if len(recs) < 2 {
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(prefetchWorkers, len(recs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(recs)) && ctx.Err() == nil; i = next.Add(1) - 1 {
				recs[i].Span()
			}
		}()
	}
	wg.Wait()
}

// Data returns the bytes of a stored record in place, after reading its
// local header for their offset (once: Span).
func (rec *Record) Data() (*io.SectionReader, error) {
	sp, err := rec.Span()
	if err != nil {
		return nil, err
	}
	off := sp.Begin
	n := int64(rec.f.UncompressedSize64)
	if off < 0 || off > rec.size || n > rec.size-off {
		return nil, fmt.Errorf("%w: record of %d bytes at offset %d runs past the end of the %d-byte file", ErrTruncated, n, off, rec.size)
	}
	return io.NewSectionReader(rec.r, off, n), nil
}

// Span is where a record's (compressed) bytes lie in the archive.
type Span struct {
	Name       string
	Begin, End int64
}

// CheckOverlaps refuses records whose bytes overlap (an ErrMalformed
// *RecordError naming one): torch.save never writes such an archive, and
// a central directory pointing many entries at one record multiplies what
// is read and written (as Go's archive/zip documentation warns its
// users). Empty records overlap nothing. It sorts spans.
func CheckOverlaps(spans []Span) error {
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].Begin != spans[j].Begin {
			return spans[i].Begin < spans[j].Begin
		}
		return spans[i].End < spans[j].End
	})
	var last *Span
	for i := range spans {
		s := &spans[i]
		if s.End <= s.Begin {
			continue
		}
		if last != nil && s.Begin < last.End {
			return &RecordError{Name: s.Name, Err: fmt.Errorf("%w: records %s and %s share bytes %d-%d of the file (overlapping or aliased zip entries)",
				ErrMalformed, last.Name, s.Name, s.Begin, min(s.End, last.End))}
		}
		if last == nil || s.End > last.End {
			last = s
		}
	}
	return nil
}

// SpanGuard holds the records' spans known so far, sorted and disjoint,
// for records whose place in the archive is found only when they are
// first read (over a network, where every local header is a round trip):
// a record that shares bytes with one already known is refused then, as
// CheckOverlaps refuses it for records whose spans are read at once.
type SpanGuard struct {
	mu    sync.Mutex
	spans []Span
}

// Seed takes the spans that CheckOverlaps has sorted and found disjoint.
func (g *SpanGuard) Seed(spans []Span) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range spans {
		if s.End > s.Begin {
			g.spans = append(g.spans, s)
		}
	}
}

// Add registers s, or reports (ErrMalformed) the record it overlaps.
func (g *SpanGuard) Add(s Span) error {
	if s.End <= s.Begin {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	i := sort.Search(len(g.spans), func(i int) bool { return g.spans[i].Begin >= s.Begin })
	for _, j := range []int{i - 1, i} {
		if j < 0 || j >= len(g.spans) {
			continue
		}
		o := g.spans[j]
		if o.Name == s.Name && o.Begin == s.Begin && o.End == s.End {
			return nil
		}
		if s.Begin < o.End && o.Begin < s.End {
			return fmt.Errorf("%w: records %s and %s share bytes %d-%d of the file (overlapping or aliased zip entries)",
				ErrMalformed, o.Name, s.Name, max(s.Begin, o.Begin), min(s.End, o.End))
		}
	}
	g.spans = append(g.spans, Span{})
	copy(g.spans[i+1:], g.spans[i:])
	g.spans[i] = s
	return nil
}
