package ckpt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/minio/minio-go/v7"
)

// memFileSources writes the checkpoints of the memory-file tests into a
// new directory: a zip torch.save whose 50 MiB storage crosses a 32 MiB
// segment boundary of the object (a digest chunk across two GETs), a
// legacy torch.save (storages at unaligned offsets), safetensors, and
// safetensors in two shards with their index. The .pt files come from
// torch (skipped without it, as the interop tests are).
func memFileSources(t *testing.T) (dir string, files []string) {
	t.Helper()
	testenv.Require(t, "torch")
	dir = t.TempDir()
	script := `
import sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(1)
sd = {"big": torch.randn(50 * 2**20 // 4, generator=g),
      "odd": torch.randint(0, 256, (3 * 2**20 + 17,), dtype=torch.uint8, generator=g),
      "small": torch.randn(1000, generator=g)}
sd["view"] = sd["big"][1000:2000]
torch.save(sd, out + "/model.pt")
legacy = {"a": torch.randn(6 * 2**20 // 4, generator=g), "odd": sd["odd"].clone(), "small": sd["small"].clone()}
torch.save(legacy, out + "/legacy.pt", _use_new_zipfile_serialization=False)
`
	if out, err := exec.Command(testenv.Python(), "-c", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("torch.save: %v\n%s", err, out)
	}
	rng := rand.New(rand.NewSource(7))
	tensor := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	writeU8ST(t, filepath.Join(dir, "model.safetensors"), []string{"w0", "w1", "w2"}, [][]byte{tensor(5<<20 + 3), tensor(2 << 20), tensor(700 << 10)})
	writeU8ST(t, filepath.Join(dir, "model-00001-of-00002.safetensors"), []string{"s0", "s1"}, [][]byte{tensor(4<<20 + 5), tensor(3 << 19)})
	writeU8ST(t, filepath.Join(dir, "model-00002-of-00002.safetensors"), []string{"s2"}, [][]byte{tensor(3 << 20)})
	index, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": map[string]string{
		"s0": "model-00001-of-00002.safetensors", "s1": "model-00001-of-00002.safetensors", "s2": "model-00002-of-00002.safetensors"}})
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, []string{"model.pt", "legacy.pt", "model.safetensors", "model.safetensors.index.json"}
}

// writeST writes a safetensors file of U8 tensors.
func writeU8ST(t *testing.T, path string, names []string, data [][]byte) {
	t.Helper()
	header := map[string]any{}
	var off int
	for i, n := range names {
		header[n] = map[string]any{"dtype": "U8", "shape": []int{len(data[i])}, "data_offsets": []int{off, off + len(data[i])}}
		off += len(data[i])
	}
	h, _ := json.Marshal(header)
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(out, h...)
	for _, d := range data {
		out = append(out, d...)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// memFileBucket uploads every file of dir to a fresh bucket of the shared
// MinIO and returns the URL prefix.
func memFileBucket(t *testing.T, dir string) string {
	t.Helper()
	bucket := minioBucket(t)
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range names {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		putMemFileObject(t, bucket, filepath.Base(p), data)
	}
	return "s3://" + bucket + "/"
}

func putMemFileObject(t *testing.T, bucket, key string, data []byte) {
	t.Helper()
	if _, err := minioSrv.Client.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}

// memFileMapping returns the line of /proc/self/maps that maps b's first
// byte, if it is a mapping of a load's memory file.
func memFileMapping(t *testing.T, b []byte) string {
	t.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	at := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(line, "memfd:ckpt-load") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		l, _ := strconv.ParseUint(lo, 16, 64)
		h, _ := strconv.ParseUint(hi, 16, 64)
		if at >= l && at < h {
			return line
		}
	}
	return ""
}

// TestLoadMemFile loads each checkpoint from MinIO and from a web server
// with WithFileMapping, which receives the storages from the object store
// into a memory file, and checks every storage's bytes, digest and CRC32
// check against the same file loaded from the local disk and loaded from
// the same URL into Go memory (today's path); that the storages larger
// than a piece are mappings of the memory file while the result is open,
// and are unmapped by Close.
//
// The subtests share the files (torch is slow to start): corrupt and heap
// follow.
func TestLoadMemFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("memory files are Linux's")
	}
	dir, files := memFileSources(t)
	t.Run("corrupt", func(t *testing.T) { testLoadMemFileCorrupt(t, dir) })
	t.Run("heap", func(t *testing.T) { testLoadMemFileHeap(t, dir) })
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	prefixes := map[string]string{"s3": memFileBucket(t, dir), "http": hs.URL + "/"}
	ctx := context.Background()
	for _, scheme := range []string{"s3", "http"} {
		for _, name := range files {
			t.Run(scheme+"/"+name, func(t *testing.T) {
				local, err := ckpt.Load(ctx, filepath.Join(dir, name), ckpt.WithFileMapping())
				if err != nil {
					t.Fatal(err)
				}
				defer local.Close()
				copied, err := ckpt.Load(ctx, prefixes[scheme]+name)
				if err != nil {
					t.Fatal(err)
				}
				defer copied.Close()
				m, err := ckpt.Load(ctx, prefixes[scheme]+name, ckpt.WithFileMapping())
				if err != nil {
					t.Fatal(err)
				}
				got, want, plain := m.Host.Storages, local.Host.Storages, copied.Host.Storages
				if len(got) != len(want) || len(plain) != len(want) {
					t.Fatalf("%d storages from the memory file, %d from the disk, %d copied", len(got), len(want), len(plain))
				}
				var inMem []*devicecopy.HostStorage
				for i, g := range got {
					w, p := want[i], plain[i]
					if g.Storage.Key != w.Storage.Key || !bytes.Equal(g.Data, w.Data) || !bytes.Equal(p.Data, w.Data) {
						t.Fatalf("storage %d (%s): %d bytes differ from the disk's %d (%s)", i, g.Storage.Key, len(g.Data), len(w.Data), w.Storage.Key)
					}
					if g.Digest != w.Digest || p.Digest != w.Digest || g.CRCChecked != w.CRCChecked {
						t.Errorf("storage %s: digest %v CRC checked %v; disk %v %v; copied %v", g.Storage.Key, g.Digest, g.CRCChecked, w.Digest, w.CRCChecked, p.Digest)
					}
					if p.MemFile {
						t.Errorf("storage %s: loaded without WithFileMapping into a memory file", p.Storage.Key)
					}
					if g.MemFile != (g.Storage.NBytes > 1<<20) {
						t.Errorf("storage %s of %d bytes: MemFile %v", g.Storage.Key, g.Storage.NBytes, g.MemFile)
					}
					if g.MemFile {
						if memFileMapping(t, g.Data) == "" {
							t.Errorf("storage %s: MemFile, but its bytes are not in a memory file's mapping", g.Storage.Key)
						}
						inMem = append(inMem, g)
					}
				}
				if len(inMem) == 0 {
					t.Fatal("no storage was received into the memory file")
				}
				data := inMem[0].Data
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				if line := memFileMapping(t, data); line != "" {
					t.Errorf("after Close the memory file is still mapped: %s", line)
				}
			})
		}
	}
}

// testLoadMemFileCorrupt flips one byte of the 50 MiB storage of a zip
// torch.save in MinIO: the load into the memory file fails with the CRC32
// error that the load into Go memory gives, returns nothing and leaves no
// mapping behind.
func testLoadMemFileCorrupt(t *testing.T, src string) {
	data, err := os.ReadFile(filepath.Join(src, "model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40 // inside "big", which is most of the file
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.pt"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	url := memFileBucket(t, dir) + "model.pt"
	ctx := context.Background()
	before := countMemFileMaps(t)
	_, want := ckpt.Load(ctx, url)
	m, err := ckpt.Load(ctx, url, ckpt.WithFileMapping())
	var ce *devicecopy.CRCError
	if m != nil || !errors.As(err, &ce) || want == nil || err.Error() != want.Error() {
		t.Fatalf("got %v, %v; want the copied load's error %v", m, err, want)
	}
	if !strings.Contains(err.Error(), "big") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q does not name the tensor in one line", err)
	}
	if after := countMemFileMaps(t); after != before {
		t.Errorf("%d memory-file mappings before the failed load, %d after", before, after)
	}
}

func countMemFileMaps(t *testing.T) int {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Count(string(maps), "memfd:ckpt-load")
}

// testLoadMemFileHeap checks that a load into the memory file allocates
// buffers, not the object: the Go heap allocated during a 53 MiB load from
// MinIO stays under a fifth of it, while the same load into Go memory
// allocates at least its size (the measure can fail).
func testLoadMemFileHeap(t *testing.T, dir string) {
	url := memFileBucket(t, dir) + "model.pt"
	fi, err := os.Stat(filepath.Join(dir, "model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	allocated := func(opts ...ckpt.Option) uint64 {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		m, err := ckpt.Load(context.Background(), url, opts...)
		runtime.ReadMemStats(&b)
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		return b.TotalAlloc - a.TotalAlloc
	}
	copied := allocated()
	mem := allocated(ckpt.WithFileMapping())
	t.Logf("file %d bytes; allocated: %d into Go memory, %d into the memory file", fi.Size(), copied, mem)
	if copied < uint64(fi.Size())*9/10 {
		t.Fatalf("the load into Go memory allocated %d bytes for a %d-byte file: the measure is broken", copied, fi.Size())
	}
	if mem > uint64(fi.Size())/5 {
		t.Errorf("the load into the memory file allocated %d bytes of Go heap for a %d-byte file", mem, fi.Size())
	}
}
