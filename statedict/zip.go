package statedict

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// readZip reads torch's zip format (torch.save since 1.6): one top folder
// holding data.pkl, data/<key> records, version and (torch >= 2.1)
// byteorder. The container is torchzip's (torchzip.Reader: the records,
// where their bytes lie, their CRC32s); this is the model: data.pkl's
// object tree and the storages it references.
func readZip(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	var opts []torchzip.ReadOption
	if cfg.ctx != nil {
		opts = append(opts, torchzip.WithContext(cfg.ctx))
	}
	zr, err := torchzip.NewReader(r, size, opts...)
	if err != nil {
		return nil, fromFormat(err)
	}
	prefix := zr.Prefix()
	ck := &Checkpoint{Format: FormatTorchZip, ByteOrder: "little"}
	if _, ok := zr.Record("constants.pkl"); ok {
		ck.Warnings = append(ck.Warnings, "this is a TorchScript archive (torch.jit.save): only its data.pkl tensors are read, not its code; tensors that are plain attributes (not parameters or buffers) are flagged attr")
	}
	small := func(name string) (string, bool, error) {
		rec, ok := zr.Record(name)
		if !ok {
			return "", false, nil
		}
		b, err := rec.ReadAll(4096)
		return strings.TrimSpace(string(b)), true, fromFormat(err)
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
	pf, ok := zr.Record("data.pkl")
	pklName := prefix + "/data.pkl"
	if ok {
		pklName = pf.Name()
	}
	if !ok {
		return nil, &Error{Record: pklName, Err: fmt.Errorf("%w: no data.pkl in the archive", ErrMissingRecord)}
	}
	data, err := pf.ReadAll(cfg.maxPickle)
	if err != nil {
		return nil, &Error{Record: pklName, Err: fromFormat(err)}
	}
	if cfg.fs == nil {
		// A local file: every storage's local header is read below (its
		// span); read them at once first.
		ctx := cfg.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		zr.PrefetchSpans(ctx, "data/")
	}
	used := make(map[string]*Storage)
	spans := []torchzip.Span{}
	guard := &torchzip.SpanGuard{}
	if sp, err := pf.Span(); err == nil {
		spans = append(spans, sp)
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
		rec, ok := zr.Record("data/" + ref.Key)
		if !ok {
			return nil, &Error{Record: prefix + "/data/" + ref.Key, Err: fmt.Errorf("%w: storage %s is referenced by data.pkl but not in the archive", ErrMissingRecord, ref.Key)}
		}
		s, err := newStorage(ref, rec.Name(), rec.Size())
		if err != nil {
			return nil, err
		}
		s.BigEndian = ck.ByteOrder == "big"
		s.CRC32, s.HasCRC = rec.CRC32()
		switch declared := ref.Numel * int64(max(s.DType.Size(), 1)); {
		case s.NBytes < declared:
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("record %s holds %d bytes, storage %s declares %d", s.Record, s.NBytes, s.Key, declared))
		case rec.Size() > declared:
			// torch.save writes exactly the storage's bytes. The extra
			// bytes are ignored, as torch.load ignores them; the CRC32
			// covers them, so it cannot be checked over the storage (a
			// check would report damage that is not there).
			ck.Warnings = append(ck.Warnings, fmt.Sprintf("record %s holds %d bytes, more than the %d that storage %s declares: the extra bytes are ignored and the record's CRC32, which covers them, is not checked",
				s.Record, rec.Size(), declared, s.Key))
			s.HasCRC = false
		}
		var lazy *torchzip.SpanGuard
		if cfg.fs != nil && rec.Stored() {
			lazy = guard
		}
		if s.src, err = zipSource(rec, ck, cfg, lazy); err != nil {
			return nil, &Error{Record: s.Record, Err: err}
		}
		if lazy == nil {
			sp, err := rec.Span()
			if err != nil {
				return nil, &Error{Record: s.Record, Err: fromFormat(err)}
			}
			spans = append(spans, sp)
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
	if err := torchzip.CheckOverlaps(spans); err != nil {
		return nil, fromFormat(err)
	}
	guard.Seed(spans)
	bld := newBuilder(ck, pklName, cfg, int64(len(data)))
	if _, ok := zr.Record("constants.pkl"); ok {
		bld.script = readScriptClasses(zr)
	}
	if err := bld.walk(root, "", false); err != nil {
		return nil, err
	}
	if n := countUnused(zr, used); n > 0 {
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

// countUnused counts the records under data/ that no storage uses.
func countUnused(zr *torchzip.Reader, used map[string]*Storage) int {
	keys := make(map[string]bool, len(used))
	for k := range used {
		keys[torchzip.RecordKey(k)] = true
	}
	n := 0
	for _, name := range zr.Keys() {
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

// zipSource serves the bytes of record rec. With a guard (files read
// over a network), a stored record's place in the file is found on its
// first read and registered with guard then, instead of at open.
func zipSource(rec *torchzip.Record, ck *Checkpoint, cfg *config, guard *torchzip.SpanGuard) (storageSource, error) {
	if err := rec.Check(); err != nil {
		return nil, fromFormat(err)
	}
	if !rec.Stored() {
		return &zipDeflateSource{rec: rec, tempDir: cfg.tempDir, ck: ck, ctx: cfg.ctx}, nil
	}
	if guard != nil {
		// Over a network every local header is a round trip: found
		// when the data is first read, not at open, so that opening
		// costs the zip directory and the pickle only. The record's
		// bytes are checked against the others' then.
		return &lazyZipSource{rec: rec, guard: guard}, nil
	}
	return storedSource(rec)
}

// storedSource serves a stored zip record in place, after reading its
// local header for the data offset.
func storedSource(rec *torchzip.Record) (*sectionSource, error) {
	sec, err := rec.Data()
	if err != nil {
		return nil, fromFormat(err)
	}
	r, off, n := sec.Outer()
	return &sectionSource{r: r, off: off, n: n}, nil
}

// lazyZipSource is a stored record whose local header is read on first
// use.
type lazyZipSource struct {
	rec   *torchzip.Record
	guard *torchzip.SpanGuard

	once sync.Once
	src  *sectionSource
	err  error
}

func (s *lazyZipSource) resolve() (*sectionSource, error) {
	s.once.Do(func() {
		s.src, s.err = storedSource(s.rec)
		if s.err == nil {
			s.err = fromFormat(s.guard.Add(torchzip.Span{Name: s.rec.Name(), Begin: s.src.off, End: s.src.off + s.src.n}))
		}
		if s.err != nil {
			s.err = &Error{Record: s.rec.Name(), Err: s.err}
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
