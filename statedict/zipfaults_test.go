package statedict

import (
	"archive/zip"
	"bytes"
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
