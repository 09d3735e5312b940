package scan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// A DCP data file (__R_N.distcp) is a run of torch.save zips, one per
// saved item: torch.distributed.checkpoint's loader torch.loads each one
// from the byte range the .metadata lists, non-tensor values with
// weights_only=False. A zip reader sees only the last of them (the end
// record at the end of the file), so distcp scans each item on its own:
// every range the .metadata beside the file lists for it, and every zip
// the file holds, found by its end record.

// maxDCPItems bounds the zips looked for in one data file.
const maxDCPItems = 1 << 20

type span struct{ begin, end int64 }

func (s *scanner) distcp(r io.ReaderAt, size int64, path string) {
	seen := map[span]bool{}
	item := func(sp span, rec string) {
		if seen[sp] || sp.begin < 0 || sp.end > size || sp.begin >= sp.end {
			return
		}
		seen[sp] = true
		n := sp.end - sp.begin
		if err := s.content(io.NewSectionReader(r, sp.begin, n), n, path, rec, 1, true); err != nil {
			s.problem(path, rec, err)
		}
	}
	base := filepath.Base(path)
	if md := s.dcpMetadata(filepath.Join(filepath.Dir(path), dcp.MetadataFile)); md != nil {
		for _, e := range md.Entries {
			if !e.Tensor && e.Value.File == base {
				item(span{e.Value.Offset, e.Value.Offset + e.Value.Length}, fmt.Sprintf("%s at %d", e.FQN, e.Value.Offset))
			}
			for _, c := range e.Chunks {
				if c.File == base {
					item(span{c.Offset, c.Offset + c.Length}, fmt.Sprintf("%s at %d", e.FQN, c.Offset))
				}
			}
		}
	}
	zips, err := findZips(s, r, size)
	for _, sp := range zips {
		item(sp, fmt.Sprintf("item at %d", sp.begin))
	}
	if err != nil {
		s.problem(path, "", err)
	}
	if len(seen) == 0 {
		// Not a run of zips: scan it as any other file.
		if err := s.content(r, size, path, "", 0, true); err != nil {
			s.problem(path, "", err)
		}
	}
}

// dcpMetadata parses the .metadata at path, nil if there is none or it
// cannot be read (it is scanned as a file of its own anyway).
func (s *scanner) dcpMetadata(path string) *dcp.Metadata {
	if md, ok := s.dcp[path]; ok {
		return md
	}
	md := parseDCPMetadata(path, s.cfg.maxPickle)
	if s.dcp == nil {
		s.dcp = map[string]*dcp.Metadata{}
	}
	s.dcp[path] = md
	return md
}

func parseDCPMetadata(path string, maxPickle int64) *dcp.Metadata {
	f, fi, err := statedict.OpenRegular(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi.Size() > maxPickle {
		return nil
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, fi.Size()), b); err != nil {
		return nil
	}
	md, err := dcp.ParseMetadata(b)
	if err != nil {
		return nil
	}
	return md
}

var (
	eocdSig   = []byte("PK\x05\x06")
	eocd64Sig = []byte("PK\x06\x06")
	localSig  = []byte("PK\x03\x04")
)

// findZips returns the byte ranges of the zips in r, in file order, each
// found by its end-of-central-directory record (and the zip64 record
// torch writes before it) and checked to start with a local file header.
// Ranges that overlap an earlier one (a zip stored in a zip) are left to
// the scan of the outer zip.
func findZips(s *scanner, r io.ReaderAt, size int64) ([]span, error) {
	const chunk = 1 << 20
	var out []span
	last := int64(0)
	buf := make([]byte, chunk+3)
	for off := int64(0); off < size; off += chunk {
		if err := s.ctx.Err(); err != nil {
			return out, err
		}
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		if n == 0 && err != nil {
			return out, fmt.Errorf("read at %d: %v", off, err)
		}
		b := buf[:n]
		for i := 0; ; {
			k := bytes.Index(b[i:], eocdSig)
			if k < 0 || int64(i+k) >= chunk {
				break
			}
			pos := off + int64(i+k)
			i += k + 1
			sp, ok := zipAt(r, size, pos)
			if !ok || sp.begin < last {
				continue
			}
			if len(out) == maxDCPItems {
				return out, fmt.Errorf("more than %d zips in one file", maxDCPItems)
			}
			out = append(out, sp)
			last = sp.end
		}
	}
	return out, nil
}

// zipAt returns the range of the zip whose end record is at pos.
func zipAt(r io.ReaderAt, size, pos int64) (span, bool) {
	var e [22]byte
	if pos+22 > size {
		return span{}, false
	}
	if _, err := r.ReadAt(e[:], pos); err != nil {
		return span{}, false
	}
	cdSize := int64(binary.LittleEndian.Uint32(e[12:]))
	cdOff := int64(binary.LittleEndian.Uint32(e[16:]))
	end := pos + 22 + int64(binary.LittleEndian.Uint16(e[20:]))
	cdEnd := pos
	if pos >= 76 {
		var z [56]byte
		if _, err := r.ReadAt(z[:], pos-76); err == nil && bytes.Equal(z[:4], eocd64Sig) {
			cdEnd = pos - 76
			cdSize = int64(binary.LittleEndian.Uint64(z[40:]))
			cdOff = int64(binary.LittleEndian.Uint64(z[48:]))
		}
	}
	if cdSize < 0 || cdOff < 0 || cdSize > cdEnd || cdOff > cdEnd-cdSize || end > size {
		return span{}, false
	}
	begin := cdEnd - cdSize - cdOff
	var h [4]byte
	if _, err := r.ReadAt(h[:], begin); err != nil || !bytes.Equal(h[:], localSig) {
		return span{}, false
	}
	return span{begin, end}, true
}
