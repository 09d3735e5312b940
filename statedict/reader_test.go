package statedict

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/klauspost/compress/zstd"
)

// rangeRecorder is an io.ReaderAt that records every byte range read.
type rangeRecorder struct {
	r      io.ReaderAt
	mu     sync.Mutex
	ranges [][2]int64
}

func (rr *rangeRecorder) ReadAt(p []byte, off int64) (int, error) {
	n, err := rr.r.ReadAt(p, off)
	rr.mu.Lock()
	rr.ranges = append(rr.ranges, [2]int64{off, off + int64(n)})
	rr.mu.Unlock()
	return n, err
}

// TestOpenIsLazy checks that opening reads metadata only: on checkpoints
// holding 8 MB of tensors (made by torch), open reads a bounded amount (the
// zip directory, the pickle, and for the legacy formats small read-ahead windows).
func TestOpenIsLazy(t *testing.T) {
	testenv.Require(t, "torch")
	dir := t.TempDir()
	script := `import sys, torch
sd = {f"layer{i}.weight": torch.full((512, 1024), float(i)) for i in range(4)}
torch.save(sd, sys.argv[1] + "/big_zip.pt")
torch.save(sd, sys.argv[1] + "/big_legacy.pt", _use_new_zipfile_serialization=False)`
	if out, err := exec.Command(testenv.Python(), "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("torch.save: %v\n%s", err, out)
	}
	for _, name := range []string{"big_zip.pt", "big_legacy.pt"} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fi, _ := f.Stat()
			rr := &rangeRecorder{r: f}
			ck, err := NewReader(rr, fi.Size())
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			var read int64
			for _, r := range rr.ranges {
				read += r[1] - r[0]
			}
			if len(ck.Tensors) != 4 || fi.Size() < 8<<20 {
				t.Fatalf("%d tensors in %d bytes", len(ck.Tensors), fi.Size())
			}
			if read > 200<<10 {
				t.Errorf("open read %d bytes of a %d-byte file", read, fi.Size())
			}
			t.Logf("open read %d of %d bytes", read, fi.Size())
		})
	}
}

// TestZstdWrapped wraps a fixture in zstd on the fly and reads it back.
func TestZstdWrapped(t *testing.T) {
	orig, err := os.ReadFile("../testdata/fixtures/training.pt")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write(orig)
	zw.Close()
	p := filepath.Join(t.TempDir(), "training.pt.zst")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ck, err := Open(p, WithTempDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	plain, err := NewReader(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Compression != "zstd" || ck.Format != FormatTorchZip || len(ck.Tensors) != len(plain.Tensors) {
		t.Fatalf("compression %q format %q tensors %d, want zstd torch-zip %d", ck.Compression, ck.Format, len(ck.Tensors), len(plain.Tensors))
	}
	for i, tt := range ck.Tensors {
		a, err := tt.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := plain.Tensors[i].ReadAll()
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs after zstd round trip", tt.Name)
		}
	}
	// A bomb: more output than allowed is refused, not spooled to disk.
	if _, err := Open(p, WithTempDir(t.TempDir()), WithMaxDecompressedSize(100)); !errors.Is(err, ErrMalformed) {
		t.Errorf("over-limit decompression: %v, want ErrMalformed", err)
	}
}

func TestNewReaderRejectsIndex(t *testing.T) {
	b, err := os.ReadFile("../testdata/fixtures/sharded_st/model.safetensors.index.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewReader(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrNeedsDirectory) {
		t.Fatalf("err %v, want ErrNeedsDirectory", err)
	}
}

// TestBigEndianSwap: the logical reader swaps by element size, complex by halves.
func TestBigEndianSwap(t *testing.T) {
	raw := []byte{0x3f, 0x80, 0, 0, 0x40, 0, 0, 0} // big-endian float32 1.0, 2.0
	s := &Storage{Key: "0", DType: dtype.Float32, NBytes: 8, BigEndian: true, src: &sectionSource{r: bytes.NewReader(raw), n: 8}}
	tt := &Tensor{Name: "x", DType: dtype.Float32, Shape: []int64{2}, Strides: []int64{1}, Storage: s}
	b, err := tt.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}; !bytes.Equal(b, want) {
		t.Errorf("swapped % x, want % x", b, want)
	}
	tt.Strides, tt.Shape = []int64{1}, []int64{1}
	tt.Offset = 1
	if b, _ := tt.ReadAll(); !bytes.Equal(b, []byte{0, 0, 0, 0x40}) {
		t.Errorf("offset view % x", b)
	}
	// Readers in whole elements still serve one byte at a time.
	rc, err := tt.Open()
	if err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	var got []byte
	for {
		n, err := rc.Read(one)
		got = append(got, one[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, []byte{0, 0, 0, 0x40}) {
		t.Errorf("byte-at-a-time % x", got)
	}
	if dtype.Complex64.SwapUnit() != 4 || dtype.Float16.SwapUnit() != 2 || dtype.Bool.SwapUnit() != 1 {
		t.Error("swap units")
	}
}
