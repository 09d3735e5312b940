package convert

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/safetensors"
)

// writeF32Safetensors writes a safetensors file of n float32 tensors of
// per bytes each, of random values, with the reference writer's padding,
// and returns their bytes by name.
func writeF32Safetensors(t *testing.T, path string, n, per int) map[string][]byte {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	var decl []safetensors.WriterTensor
	data := map[string][]byte{}
	for i := 0; i < n; i++ {
		name := string(rune('a'+i)) + ".weight"
		decl = append(decl, safetensors.WriterTensor{Name: name, DType: "F32", Shape: []int64{int64(per / 4)}})
		b := make([]byte, per)
		rng.Read(b)
		for j := 3; j < len(b); j += 4 {
			b[j] &= 0x3f // finite values
		}
		data[name] = b
	}
	var buf bytes.Buffer
	w, err := safetensors.NewWriter(&buf, decl, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range w.Order() {
		if _, err := w.WriteTensor(d.Name, bytes.NewReader(data[d.Name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestPaddedHeader: a large output's data starts on a page boundary, the
// header is the unpadded one followed by spaces only, the file parses,
// and every tensor's bytes are the input's, copied in the kernel; a small
// output keeps the reference writer's padding to 8.
func TestPaddedHeader(t *testing.T) {
	for _, c := range []struct {
		name    string
		n, per  int
		aligned bool
	}{
		{"large", 3, 1 << 20, true},
		{"small", 3, 1 << 10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in, out := filepath.Join(dir, "in.safetensors"), filepath.Join(dir, "out.safetensors")
			want := writeF32Safetensors(t, in, c.n, c.per)
			before := atomicfile.RangeCopies.Load()
			convert(t, in, out)
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.DataOffset%headerAlign == 0; got != c.aligned {
				t.Errorf("data offset %d: page-aligned %v, want %v", f.DataOffset, got, c.aligned)
			}
			if f.DataOffset%8 != 0 {
				t.Errorf("data offset %d not a multiple of 8", f.DataOffset)
			}
			json := b[8:f.DataOffset]
			trimmed := bytes.TrimRight(json, " ")
			if trimmed[len(trimmed)-1] != '}' {
				t.Errorf("header does not end in '}' and spaces: ...%q", json[max(0, len(trimmed)-8):])
			}
			for _, ti := range f.Tensors {
				got := b[f.DataOffset+ti.Begin : f.DataOffset+ti.End]
				if !bytes.Equal(got, want[ti.Name]) {
					t.Errorf("%s: bytes differ from the input's", ti.Name)
				}
			}
			if copied := atomicfile.RangeCopies.Load() - before; c.aligned && copied < int64(c.n*c.per) {
				t.Errorf("%d bytes copied in the kernel, want %d", copied, c.n*c.per)
			}
		})
	}
}

// TestPaddedHeaderSharded: every shard of a sharded output is padded
// alike, and its size is the one planned (sizes, which the shard split
// and the index use).
func TestPaddedHeaderSharded(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	writeF32Safetensors(t, in, 4, 1<<20)
	convert(t, in, filepath.Join(dir, "shards", "model.safetensors.index.json"), WithMaxShardSize(3<<20))
	shards, err := filepath.Glob(filepath.Join(dir, "shards", "model-*-of-*.safetensors"))
	if err != nil || len(shards) < 2 {
		t.Fatalf("want several shards, got %v (%v)", shards, err)
	}
	for _, s := range shards {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if f.DataOffset%headerAlign != 0 {
			t.Errorf("%s: data offset %d", s, f.DataOffset)
		}
	}
}

// TestInteropPaddedSafetensorsLibrary: the safetensors library loads a
// page-padded output (every output padded, padMin 0), single and sharded,
// to the original's values.
func TestInteropPaddedSafetensorsLibrary(t *testing.T) {
	testenv.Require(t, "torch", "numpy", "safetensors")
	defer func(v int64) { padMin = v }(padMin)
	padMin = 0
	dir := t.TempDir()
	py(t, "make", dir)
	single := filepath.Join(dir, "one.safetensors")
	convert(t, filepath.Join(dir, "orig.pt"), single)
	convert(t, filepath.Join(dir, "orig.pt"), filepath.Join(dir, "shards", "model.safetensors.index.json"), WithMaxShardSize(200))
	b, err := os.ReadFile(single)
	if err != nil {
		t.Fatal(err)
	}
	if off := 8 + binary.LittleEndian.Uint64(b); off%headerAlign != 0 {
		t.Fatalf("data offset %d not padded", off)
	}
	py(t, "stlib", dir, single)
	shards, err := filepath.Glob(filepath.Join(dir, "shards", "model-*-of-*.safetensors"))
	if err != nil || len(shards) < 2 {
		t.Fatalf("want several shards, got %v (%v)", shards, err)
	}
	py(t, append([]string{"stlib", dir}, shards...)...)
}
