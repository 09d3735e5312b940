package torchzip

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestZip64 places records beyond 4 GiB in a sparse file, so that the
// ZIP64 extra fields, descriptors and end records are exercised cheaply,
// and reads the archive back with archive/zip.
func TestZip64(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const skip = 1<<32 + 3
	if _, err := f.Seek(skip, io.SeekStart); err != nil {
		t.Skip("no sparse files here:", err)
	}
	zw := NewWriter(f)
	zw.off = skip // as if 4 GiB of records came first
	payload := bytes.Repeat([]byte("ckpt"), 100)
	if err := zw.WriteRecord("data/0", int64(len(payload)), bytes.NewReader(payload)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	zr, err := zip.NewReader(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2 {
		t.Fatalf("%d records", len(zr.File))
	}
	for _, e := range zr.File {
		off, err := e.DataOffset()
		if err != nil || off < skip || off%Alignment != 0 {
			t.Errorf("%s at %d (%v)", e.Name, off, err)
		}
		rc, err := e.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
		if e.Name == "archive/data/0" && !bytes.Equal(b, payload) {
			t.Errorf("payload differs")
		}
	}
}
