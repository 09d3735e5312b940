package scan

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// speculative scans a record that may or may not be a pickle.
func (s *scanner) speculative(r io.ReaderAt, size int64, file, record string) {
	sub := &scanner{ctx: s.ctx, cfg: s.cfg, rep: &Report{}}
	if err := sub.stream(r, 0, size, file, record, true); err == nil {
		s.rep.Findings = append(s.rep.Findings, sub.rep.Findings...)
		s.rep.Pickles += sub.rep.Pickles
		return
	}
	for _, f := range sub.rep.Findings {
		if f.Verdict == pickle.VerdictUnsafe {
			s.rep.Findings = append(s.rep.Findings, f)
		}
	}
}

// hubZip scans a zip found by its end record in a file that does not
// start as one: torch.hub.load_state_dict_from_url takes any file Python's
// zipfile opens (which looks for the end record, not the start) and, when
// it holds one member, torch.loads that member.
// It reports whether it found such a zip.
func (s *scanner) hubZip(r io.ReaderAt, size int64, file, record string, depth int) bool {
	zr, err := zip.NewReader(r, size)
	if err != nil || len(zr.File) == 0 {
		return false
	}
	rec := join(record, "zip found by its end record")
	if err := s.zip(r, size, file, rec, depth); err != nil {
		s.problem(file, rec, err)
	}
	return true
}

// zip scans every record a loader unpickles (torchzip.IsPickleRecord:
// data.pkl, constants.pkl, ... by torch's case-insensitive lookup), every
// record that is itself an archive, and the one member of a one-member zip
// (torch.hub torch.loads it); tensor data records are not read beyond
// their first bytes.
func (s *scanner) zip(r io.ReaderAt, size int64, file, record string, depth int) error {
	// Local headers and records' first bytes from a cached window: one
	// read per 64 KiB rather than two per record (30,000 small tensors).
	r = torchzip.SmallReadCache(r, size)
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return fmt.Errorf("zip: %w", err)
	}
	members := 0
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, "/") {
			members++
		}
	}
	single := members == 1
	for _, f := range zr.File {
		if err := s.ctx.Err(); err != nil {
			return err
		}
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		rec := join(record, f.Name)
		pkl := torchzip.IsPickleRecord(f.Name)
		var sub io.ReaderAt
		n := int64(f.UncompressedSize64)
		if f.Method == zip.Store {
			off, err := f.DataOffset()
			if err != nil || off < 0 || n < 0 || off > size || n > size-off {
				s.problem(file, rec, fmt.Errorf("record runs past the end of the file"))
				continue
			}
			sub = io.NewSectionReader(r, off, n)
		} else {
			if n > s.cfg.maxPickle && !pkl && !single {
				continue // a large compressed data record: not a pickle torch reads
			}
			rc, err := f.Open()
			if err != nil {
				s.problem(file, rec, err)
				continue
			}
			b, err := readWhole(rc, f, s.cfg.maxPickle)
			rc.Close()
			if err != nil || int64(len(b)) > s.cfg.maxPickle {
				s.problem(file, rec, fmt.Errorf("cannot read record: %v", cmpErr(err, "larger than the pickle size limit")))
				continue
			}
			sub, n = memRecord{bytes.NewReader(b), b}, int64(len(b))
		}
		var head [4]byte
		k, _ := sub.ReadAt(head[:], 0)
		switch {
		case single:
			// torch.hub's legacy zip: one member, torch.loaded whatever
			// its name, so scanned as a file of its own.
			if err := s.content(sub, n, file, rec, depth+1, true); err != nil && !errors.Is(err, errNotCheckpoint) {
				s.problem(file, rec, err)
			}
		case !pkl && k >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5:
			// Not a name torch opens by default, but torch.load's
			// pickle_file argument opens any record: one that starts
			// as a pickle is scanned as one (unsafe globals only when
			// it does not parse whole: tensor bytes may start alike).
			s.speculative(sub, n, file, rec)
		case pkl:
			if err := s.stream(sub, 0, n, file, rec, true); err != nil {
				s.problem(file, rec, err)
			}
		case k == 4 && (bytes.Equal(head[:], []byte("PK\x03\x04")) || bytes.Equal(head[:2], []byte{0x1f, 0x8b}) ||
			bytes.Equal(head[:], []byte{0x28, 0xb5, 0x2f, 0xfd})):
			if err := s.content(sub, n, file, rec, depth+1, true); err != nil {
				s.problem(file, rec, err)
			}
		}
	}
	s.storageSizes(r, size, zr, file, record)
	return nil
}

// memRecord is a record read whole into memory, which pickleAt parses in
// place.
type memRecord struct {
	*bytes.Reader
	b []byte
}

// readWhole reads the deflated record f (open as rc) into one buffer, of
// up to max+1 bytes: sized once by the record's declared size as far as
// its compressed bytes can back it (deflate expands at most 1032:1), so
// that a large record is neither copied as it grows nor claimed larger
// than it can be.
func readWhole(rc io.Reader, f *zip.File, max int64) ([]byte, error) {
	hint := uint64(max)
	if f.CompressedSize64 < 1<<40 {
		hint = min(hint, f.CompressedSize64*1032+64<<10)
	}
	b := make([]byte, 0, min(hint, f.UncompressedSize64)+1)
	for int64(len(b)) <= max {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		k, err := rc.Read(b[len(b):min(cap(b), int(max)+1)])
		b = b[:len(b)+k]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
	return b, nil
}

func cmpErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}
