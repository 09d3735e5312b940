package convert

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/safetensors"
)

// damagedCopies returns copies of a torch zip fixture, one per storage
// record, with one byte of that record's data flipped (the CRC32 in the
// directory left as it was).
func damagedCopies(t *testing.T, fixture string) map[string][]byte {
	t.Helper()
	orig, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, s := range open(t, fixture).Storages {
		used[s.Record] = true
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		if !used[f.Name] || f.Method != zip.Store || f.UncompressedSize64 == 0 {
			continue
		}
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		b := bytes.Clone(orig)
		b[off+int64(f.UncompressedSize64)/2] ^= 0x40
		out[f.Name] = b
	}
	if len(out) == 0 {
		t.Fatalf("%s: no stored storage record", fixture)
	}
	return out
}

// writeDamaged writes the damaged input b to a temporary directory and
// makes an empty output directory beside it.
func writeDamaged(t *testing.T, b []byte) (in, outDir string) {
	t.Helper()
	dir := t.TempDir()
	in = filepath.Join(dir, "in.pt")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	outDir = filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return in, outDir
}

// TestConvertChecksCRC: a storage record whose bytes do not match its
// CRC32 makes every conversion of it fail, naming the record, with no
// output: whole tensors (checked as they stream), views and tied weights
// (checked apart), to safetensors and to .pth, cast or not.
func TestConvertChecksCRC(t *testing.T) {
	for _, fixture := range []string{"training.pt", "tied.pt", "views.pt"} {
		if _, err := os.Stat(fixtures + fixture); err != nil {
			continue
		}
		for rec, b := range damagedCopies(t, fixtures+fixture) {
			in, outDir := writeDamaged(t, b)
			for _, out := range []string{"o.safetensors", "o.pt"} {
				for _, opts := range [][]Option{nil, {WithDType(dtype.BFloat16)}} {
					_, err := Convert(context.Background(), open(t, in), filepath.Join(outDir, out), opts...)
					if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), rec) {
						t.Errorf("%s with %s damaged, to %s (%d options): %v", fixture, rec, out, len(opts), err)
					}
					if files := dirFiles(t, outDir); len(files) != 0 {
						t.Errorf("left %v", files)
					}
				}
			}
		}
	}
}

// TestConvertChecksDigests: a safetensors input carrying ckpt digests is
// checked against them as it streams; a damaged tensor fails the
// conversion by name, with no output.
func TestConvertChecksDigests(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src.safetensors")
	convert(t, fixtures+"training.pt", src)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var name string
	var off int64
	for _, ti := range h.Tensors {
		if ti.End > ti.Begin {
			name, off = ti.Name, h.DataOffset+ti.Begin
			break
		}
	}
	b[off] ^= 1
	bad := filepath.Join(dir, "bad.safetensors")
	os.WriteFile(bad, b, 0o644)
	outDir := filepath.Join(dir, "out")
	os.Mkdir(outDir, 0o755)
	for _, out := range []string{"o.safetensors", "o.pt"} {
		for _, opts := range [][]Option{nil, {WithDType(dtype.BFloat16)}} {
			_, err := Convert(context.Background(), open(t, bad), filepath.Join(outDir, out), opts...)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), name) {
				t.Errorf("to %s (%d options): %v, want ErrDamaged naming %s", out, len(opts), err, name)
			}
			if files := dirFiles(t, outDir); len(files) != 0 {
				t.Errorf("left %v", files)
			}
		}
	}
	// The undamaged file converts.
	convert(t, src, filepath.Join(outDir, "ok.safetensors"))
}
