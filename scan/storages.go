package scan

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// cveStorage says what torch < 2.10 does with a storage its record cannot
// back (CVE-2026-24747, fixed by validating the size in 2.10).
const cveStorage = "torch < 2.10 makes the storage that size over an allocation of the record's size, so the tensors viewing it read and write past the allocation (CVE-2026-24747)"

// storageSizes checks the storages of the torch.save zip zr (data.pkl and
// its data/<key> records, looked up as torch does: under the first
// record's folder, by torchzip.RecordKey). torch.load makes each storage the
// size the pickle declares (elements times the element size) over a
// buffer of the record's size; torch < 2.10 does not compare the two, so
// a storage declared larger than its record is an unsafe finding. A
// tensor reaching past its storage, which ckpt's loader refuses
// (statedict.ErrShortStorage) and torch refuses too, is one as well,
// unless its storage already is.
// A data.pkl that ckpt cannot unpickle is a problem, its storages not
// checked, unless the record has an unsafe finding or a problem already
// (a loader stops there, or its reading was not complete anyway) or the
// zip holds no data/ record at all (every storage torch looks up is
// missing, and it stops at the first).
func (s *scanner) storageSizes(r io.ReaderAt, size int64, zr *zip.Reader, file, record string) {
	if len(zr.File) == 0 {
		return
	}
	top, _, ok := strings.Cut(zr.File[0].Name, "/")
	if !ok {
		return
	}
	files := make(map[string]*zip.File, len(zr.File))
	records := 0 // data/ records
	for _, f := range zr.File {
		if rest, ok := strings.CutPrefix(torchzip.RecordKey(f.Name), torchzip.RecordKey(top)+"/"); ok {
			if _, dup := files[rest]; !dup {
				files[rest] = f
			}
			if strings.HasPrefix(rest, "data/") {
				records++
			}
		}
	}
	pf, ok := files["data.pkl"]
	if !ok {
		return // no torch.save zip: torch.load finds no data.pkl
	}
	if records == 0 {
		// No storage record to be shorter than its storage, and no
		// storage a tensor could reach past: torch.load fails on the
		// first storage data.pkl names. Nothing to unpickle for.
		return
	}
	pkl := join(record, pf.Name)
	rc, err := pf.Open()
	if err != nil {
		return // scanned as a record already, its problem listed there
	}
	data, err := readWhole(rc, pf, s.cfg.maxPickle)
	rc.Close()
	if err != nil || int64(len(data)) > s.cfg.maxPickle {
		return // likewise
	}
	seen := map[string]bool{}
	short := map[string]bool{} // records found shorter than their storage
	load := func(pid any) (any, error) {
		ref, err := pickle.ParseStoragePID(pid)
		if err != nil || seen[ref.Key] {
			return ref, err
		}
		seen[ref.Key] = true // torch keeps the first storage of a key
		if f, ok := files["data/"+torchzip.RecordKey(ref.Key)]; ok && ref.View == nil {
			short[f.Name] = !s.storageFits(ref, f, file, join(record, f.Name), pkl)
		}
		return ref, nil
	}
	_, err = pickle.Unpickle(data, pickle.WithLimits(s.cfg.limits), pickle.WithContext(s.ctx), pickle.WithPersistentLoad(load))
	if err != nil {
		if records > 0 && !errors.Is(err, pickle.ErrUnsafe) && !s.flagged(file, pkl) {
			s.problem(file, pkl, fmt.Errorf("storage sizes not checked past the point where ckpt's unpickler stops: %w", err))
		}
		return
	}
	if len(seen) == 0 {
		return // no storage: no tensor can reach past one
	}
	_, err = statedict.NewReaderContext(s.ctx, r, size, statedict.WithPickleLimits(s.cfg.limits), statedict.WithMaxPickleSize(s.cfg.maxPickle))
	var se *statedict.Error
	if errors.Is(err, statedict.ErrShortStorage) && errors.As(err, &se) && !short[se.Record] {
		s.rep.Findings = append(s.rep.Findings, Finding{File: file, Record: join(record, se.Record), Op: "tensor", Global: "torch.Tensor",
			Verdict: pickle.VerdictUnsafe, Reason: fmt.Sprintf("tensor %q reaches past its storage (%s): torch refuses it, and any reader that trusts it reads past the record", se.Tensor, strings.TrimPrefix(se.Err.Error(), "statedict: "))})
	}
}

// storageFits records an unsafe finding when the storage ref, named by
// the pickle record pkl, declares more bytes than its record f holds, and
// reports whether it fits.
func (s *scanner) storageFits(ref *pickle.StorageRef, f *zip.File, file, rec, pkl string) bool {
	elem := uint64(1) // UntypedStorage: Numel counts bytes
	if ref.DType != "" {
		dt, ok := dtype.Parse(ref.DType)
		if !ok {
			return true // no storage class torch has
		}
		elem = uint64(max(dt.Size(), 1))
	}
	hi, want := bits.Mul64(uint64(ref.Numel), elem)
	if hi == 0 && want <= f.UncompressedSize64 {
		return true
	}
	declared := fmt.Sprintf("%d bytes", want)
	if hi != 0 {
		declared = "more than 2^64 bytes"
	}
	s.rep.Findings = append(s.rep.Findings, Finding{File: file, Record: rec, Op: "storage", Global: "torch." + ref.Class, Verdict: pickle.VerdictUnsafe,
		Reason: fmt.Sprintf("storage %q is declared in %s as %d elements of %s (%s), but its record holds %d bytes: %s",
			ref.Key, pkl, ref.Numel, ref.Class, declared, f.UncompressedSize64, cveStorage)})
	return false
}

// flagged reports whether the report has an unsafe finding or a problem
// in the record.
func (s *scanner) flagged(file, record string) bool {
	for _, f := range s.rep.Findings {
		if f.File == file && f.Record == record && f.Verdict == pickle.VerdictUnsafe {
			return true
		}
	}
	for _, p := range s.rep.Problems {
		if p.File == file && p.Record == record {
			return true
		}
	}
	return false
}
