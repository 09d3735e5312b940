package statedict

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

// rewriteZip copies a torch zip fixture record by record (stored), letting
// edit change a record's bytes; the CRC32s are those of the new bytes.
func rewriteZip(t *testing.T, path string, edit func(name string, b []byte) []byte) []byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(edit(f.Name, b))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRecordLongerThanStorage: a record holding more bytes than its
// storage declares is reported as such, not as damage: its CRC32 covers
// bytes no tensor reads, so it is not checked over the storage.
func TestRecordLongerThanStorage(t *testing.T) {
	var rec string
	b := rewriteZip(t, "../testdata/fixtures/training.pt", func(name string, b []byte) []byte {
		if rec == "" && strings.Contains(name, "/data/") && len(b) > 0 {
			rec = name
			return append(b, make([]byte, 64)...)
		}
		return b
	})
	ck, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var s *Storage
	for _, st := range ck.Storages {
		if st.Record == rec {
			s = st
		}
	}
	if s == nil {
		t.Fatalf("no storage for %s", rec)
	}
	if s.HasCRC {
		t.Errorf("%s: CRC32 claimed checkable over a storage shorter than its record", rec)
	}
	found := false
	for _, w := range ck.Warnings {
		found = found || strings.Contains(w, rec) && strings.Contains(w, "more than")
	}
	if !found {
		t.Errorf("no warning naming %s: %q", rec, ck.Warnings)
	}
	// The storage's own bytes read as before.
	rc, err := s.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil || int64(len(got)) != s.NBytes {
		t.Errorf("read %d of %d bytes: %v", len(got), s.NBytes, err)
	}
}

// centralEntries returns the offsets of the central directory entries of
// a zip by name.
func centralEntries(b []byte) map[string]int {
	out := map[string]int{}
	for i := 0; i+46 <= len(b); i++ {
		if string(b[i:i+4]) != "PK\x01\x02" {
			continue
		}
		n := int(binary.LittleEndian.Uint16(b[i+28:]))
		if i+46+n <= len(b) {
			out[string(b[i+46:i+46+n])] = i
		}
	}
	return out
}

// TestAliasedRecords: a central directory pointing two entries at one
// record's bytes is refused, naming both records.
func TestAliasedRecords(t *testing.T) {
	b := rewriteZip(t, "../testdata/fixtures/training.pt", func(_ string, b []byte) []byte { return b })
	cd := centralEntries(b)
	a, ok1 := cd["training/data/0"]
	c, ok2 := cd["training/data/1"]
	if !ok1 || !ok2 {
		t.Fatalf("central directory: %v", cd)
	}
	copy(b[c+16:c+28], b[a+16:a+28]) // CRC32 and sizes
	copy(b[c+42:c+46], b[a+42:a+46]) // local header offset
	_, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "training/data/0") || !strings.Contains(err.Error(), "training/data/1") {
		t.Fatalf("err %v, want ErrMalformed naming both records", err)
	}
	if _, err := NewReader(bytes.NewReader(rewriteZip(t, "../testdata/fixtures/training.pt", func(_ string, b []byte) []byte { return b })), int64(len(b))); err != nil {
		t.Errorf("unaliased copy: %v", err)
	}
}

// TestDeflateClaimBounded: a deflated record whose directory claims far
// more bytes than its compressed bytes can produce is refused at open,
// naming the record, before any buffer is sized from the claim.
func TestDeflateClaimBounded(t *testing.T) {
	zr, err := zip.OpenReader("../testdata/fixtures/training.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Deflate})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	zw.Close()
	b := buf.Bytes()
	if _, err := NewReader(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatalf("deflated copy: %v", err)
	}
	e := centralEntries(b)["training/data/0"]
	binary.LittleEndian.PutUint32(b[e+24:], 0xf0000000) // claims 3.75 GiB
	_, err = NewReader(bytes.NewReader(b), int64(len(b)))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "training/data/0") || !strings.Contains(err.Error(), "more than deflate can produce") {
		t.Fatalf("err %v", err)
	}
}
