package devicecopy_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

const fixtures = "../testdata/fixtures/"

// hostFixtures are the fixtures LoadHost is checked on: every container
// (zip, v2.1 zip, big-endian, deflated, zip64, legacy, tar, safetensors,
// sharded), shared storages and views, quantized and sparse tensors.
var hostFixtures = []string{
	"zip_basic.pt", "zip_archive.pt", "zip_v21.pt", "zip_dataversion.pt", "zip_bigendian.pt", "zip_deflated.pt",
	"zip64.pt", "zip_basic.pt.gz", "legacy.pt", "tar.pt", "tied.pt", "params.pt", "training.pt", "cuda_tagged.pt",
	"cuda_training.pt", "cuda_bare.pt", "dtypes_classic.pt", "dtypes_untyped.pt", "quantized.pt", "sparse.pt",
	"root_tensor.pt", "model.safetensors", "sharded_bin", "sharded_st", "dir_checkpoint",
}

func openFixture(t testing.TB, name string) *statedict.Checkpoint {
	t.Helper()
	ck, err := statedict.Open(fixtures + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func loadCPU(t testing.TB, ck *statedict.Checkpoint, opts ...devicecopy.HostOption) *devicecopy.HostResult {
	t.Helper()
	plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := devicecopy.LoadHost(context.Background(), ck, plan, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// mappedFixtures are fixtures whose every storage lies uncompressed in the
// file, so WithFileMapping maps them all.
var mappedFixtures = map[string]bool{"zip_basic.pt": true, "legacy.pt": true, "tied.pt": true, "model.safetensors": true, "sharded_st": true}

func TestLoadHostFixtures(t *testing.T) {
	for _, name := range hostFixtures {
		for _, mapped := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/mapped=%v", name, mapped), func(t *testing.T) { testLoadHostFixture(t, name, mapped) })
		}
	}
}

func testLoadHostFixture(t *testing.T, name string, mapped bool) {
	ck := openFixture(t, name)
	var calls, lastDone, lastTotal int64
	opts := []devicecopy.HostOption{devicecopy.WithConcurrency(3), devicecopy.WithProgress(func(done, total int64) {
		if done < lastDone || done > total {
			t.Errorf("progress %d of %d after %d", done, total, lastDone)
		}
		calls++
		lastDone, lastTotal = done, total
	})}
	if mapped {
		opts = append(opts, devicecopy.WithFileMapping())
	}
	res := loadCPU(t, ck, opts...)
	for _, hs := range res.Storages {
		if hs.Mapped && !mapped || !hs.Mapped && mapped && mappedFixtures[name] && hs.Storage.NBytes > 0 {
			t.Errorf("storage %s: Mapped %v", hs.Storage.Key, hs.Mapped)
		}
	}
	// Every storage the tensors use, each once, with the bytes a
	// plain read of the storage gives, and its digest.
	want := map[*statedict.Storage][]string{}
	var total int64
	for _, tn := range ck.Tensors {
		if tn.Storage == nil {
			continue
		}
		if _, ok := want[tn.Storage]; !ok {
			total += tn.Storage.NBytes
		}
		want[tn.Storage] = append(want[tn.Storage], tn.Name)
	}
	quantOnly := 0
	for _, hs := range res.Storages {
		users, ok := want[hs.Storage]
		if !ok {
			quantOnly++
			total += hs.Storage.NBytes
		} else if !reflect.DeepEqual(hs.Tensors, users) {
			t.Errorf("storage %s: tensors %v, want %v", hs.Storage.Key, hs.Tensors, users)
		}
		rc, err := hs.Storage.Open()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(hs.Data, raw) || int64(len(hs.Data)) != hs.Storage.NBytes {
			t.Errorf("storage %s: %d bytes loaded differ from the %d in the file", hs.Storage.Key, len(hs.Data), len(raw))
		}
		if d := digest.SumBytes(raw); hs.Digest != d {
			t.Errorf("storage %s: digest %v, want %v", hs.Storage.Key, hs.Digest, d)
		}
		if hs.CRCChecked != hs.Storage.HasCRC {
			t.Errorf("storage %s: CRCChecked %v, HasCRC %v", hs.Storage.Key, hs.CRCChecked, hs.Storage.HasCRC)
		}
	}
	if len(res.Storages)-quantOnly != len(want) || res.Bytes != total {
		t.Errorf("%d storages (%d quantizer) / %d bytes loaded, want %d / %d", len(res.Storages), quantOnly, res.Bytes, len(want), total)
	}
	if (name == "quantized.pt") != (quantOnly > 0) {
		t.Errorf("%d storages outside the tensors' own", quantOnly)
	}
	if res.Bytes > 0 && (lastDone != res.Bytes || lastTotal != res.Bytes || calls == 0) {
		t.Errorf("progress ended at %d of %d after %d calls; loaded %d", lastDone, lastTotal, calls, res.Bytes)
	}
	// Every tensor's logical bytes equal statedict's own reader.
	loaded := 0
	for _, tn := range ck.Tensors {
		ht, ok := res.Tensor(tn.Name)
		if tn.Storage == nil || tn.Meta {
			continue
		}
		if !ok {
			t.Errorf("tensor %q not loaded", tn.Name)
			continue
		}
		loaded++
		got, err := ht.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		exp, err := tn.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, exp) {
			t.Errorf("tensor %q: logical bytes differ from Tensor.ReadAll", tn.Name)
		}
	}
	if loaded != len(res.Tensors) || len(res.Skipped)+loaded != len(ck.Tensors) {
		t.Errorf("%d tensors loaded, %d listed, %d skipped of %d", loaded, len(res.Tensors), len(res.Skipped), len(ck.Tensors))
	}
	res.Release()
	for _, ht := range res.Tensors {
		if _, err := ht.Bytes(); ht.Tensor.NBytes() > 0 && !errors.Is(err, devicecopy.ErrReleased) {
			t.Errorf("tensor %q after Release: %v", ht.Tensor.Name, err)
		}
	}
}

// The big-endian fixture's storages are kept in file order (so their
// digest is over the bytes in the file), and tensors come out swapped.
func TestLoadHostBigEndian(t *testing.T) {
	ck := openFixture(t, "zip_bigendian.pt")
	res := loadCPU(t, ck)
	swapped := 0
	for _, ht := range res.Tensors {
		if !ht.Storage.Storage.BigEndian {
			t.Fatalf("%s not big-endian", ht.Tensor.Name)
		}
		logical, err := ht.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := ht.Tensor.Span()
		if ht.Tensor.DType.SwapUnit() > 1 && ht.Tensor.IsContiguous() && len(logical) > 0 {
			if bytes.Equal(logical, ht.Storage.Data[b:b+int64(len(logical))]) {
				t.Errorf("%s: logical bytes equal the big-endian file bytes", ht.Tensor.Name)
			}
			swapped++
		}
	}
	if swapped == 0 {
		t.Fatal("no multi-byte tensor checked")
	}
	if f32 := res.Tensors[0]; f32.Tensor.DType == dtype.Float32 {
		got, _ := f32.Bytes()
		if be := binary.BigEndian.Uint32(f32.Storage.Data); be != binary.LittleEndian.Uint32(got) {
			t.Errorf("first float32: file %08x, logical %08x", be, binary.LittleEndian.Uint32(got))
		}
	}
}

// corruptRecord copies src to a temp dir and flips one byte in the middle of
// the stored zip record rec; the zip stays readable.
func corruptRecord(t *testing.T, src, rec string) (path string, crc uint32) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name != rec {
			continue
		}
		if f.Method != zip.Store || f.UncompressedSize64 == 0 {
			t.Fatalf("%s: method %d, %d bytes", rec, f.Method, f.UncompressedSize64)
		}
		off, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		at := off + int64(f.UncompressedSize64)/2
		b[at] ^= 0x5a
		crc = crc32.ChecksumIEEE(b[off : off+int64(f.UncompressedSize64)])
		path = filepath.Join(t.TempDir(), filepath.Base(src))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path, crc
	}
	t.Fatalf("no record %s in %s", rec, src)
	return "", 0
}

func TestLoadHostCRCMismatch(t *testing.T) {
	for _, c := range []struct{ fixture, key string }{{"zip_basic.pt", "0"}, {"tied.pt", "0"}} {
		t.Run(c.fixture, func(t *testing.T) {
			good := openFixture(t, c.fixture)
			var st *statedict.Storage
			var users []string
			for _, tn := range good.Tensors {
				if tn.Storage != nil && tn.Storage.Key == c.key {
					st = tn.Storage
					users = append(users, tn.Name)
				}
			}
			if st == nil || !st.HasCRC {
				t.Fatalf("storage %s missing or without CRC", c.key)
			}
			path, gotCRC := corruptRecord(t, fixtures+c.fixture, st.Record)
			ck, err := statedict.Open(path)
			if err != nil {
				t.Fatalf("damaged copy no longer opens: %v", err)
			}
			defer ck.Close()
			plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
			if err != nil {
				t.Fatal(err)
			}
			res, err := devicecopy.LoadHost(context.Background(), ck, plan)
			var ce *devicecopy.CRCError
			if !errors.As(err, &ce) || !errors.Is(err, devicecopy.ErrCRC) || res != nil {
				t.Fatalf("got %v, %v", res, err)
			}
			// The same from a mapping of the file.
			res, err = devicecopy.LoadHost(context.Background(), ck, plan, devicecopy.WithFileMapping())
			var mce *devicecopy.CRCError
			if !errors.As(err, &mce) || res != nil || mce.Got != ce.Got || mce.Want != ce.Want {
				t.Fatalf("mapped: got %v, %v", res, err)
			}
			want := devicecopy.CRCError{File: path, Record: st.Record, Storage: c.key, Tensors: users, Want: st.CRC32, Got: gotCRC}
			if !reflect.DeepEqual(*ce, want) {
				t.Errorf("error %+v, want %+v", *ce, want)
			}
			for _, u := range users {
				if !strings.Contains(err.Error(), u) {
					t.Errorf("message %q does not name %q", err, u)
				}
			}
			if len(users) < 2 && c.fixture == "tied.pt" {
				t.Errorf("tied.pt storage 0 has users %v", users)
			}
		})
	}
}

func TestLoadHostSelectsCPUTargets(t *testing.T) {
	ck := openFixture(t, "cuda_tagged.pt")
	plan, err := remap.NewPlan(ck.Tensors, remap.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := devicecopy.LoadHost(context.Background(), ck, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tensors) != 1 || res.Tensors[0].Tensor.Name != "stray" || len(res.Storages) != 1 ||
		!reflect.DeepEqual(res.Skipped, []string{"gpu0.weight", "gpu0.view", "gpu1.weight", "gpu1.index"}) {
		t.Errorf("loaded %d tensors, skipped %v", len(res.Tensors), res.Skipped)
	}
}

func TestLoadHostErrors(t *testing.T) {
	ck := openFixture(t, "zip_basic.pt")
	other := openFixture(t, "tied.pt")
	cpu := remap.To(remap.Device{Type: "cpu", Index: -1})
	plan, _ := remap.NewPlan(ck.Tensors, cpu)
	otherPlan, _ := remap.NewPlan(other.Tensors, cpu)
	if _, err := devicecopy.LoadHost(context.Background(), ck, otherPlan); !errors.Is(err, devicecopy.ErrPlanMismatch) {
		t.Errorf("foreign plan: %v", err)
	}
	short, _ := remap.NewPlan(ck.Tensors[1:], cpu)
	if _, err := devicecopy.LoadHost(context.Background(), ck, short); !errors.Is(err, devicecopy.ErrPlanMismatch) {
		t.Errorf("short plan: %v", err)
	}
	var total int64
	for _, s := range ck.Storages {
		total += s.NBytes
	}
	_, err := devicecopy.LoadHost(context.Background(), ck, plan, devicecopy.WithMaxHostBytes(total-1))
	var le *devicecopy.LimitError
	if !errors.As(err, &le) || !errors.Is(err, devicecopy.ErrHostLimit) || le.Needed != total || le.Limit != total-1 {
		t.Errorf("limit: %v", err)
	}
	if _, err := devicecopy.LoadHost(context.Background(), ck, plan, devicecopy.WithMaxHostBytes(total)); err != nil {
		t.Errorf("exact limit: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := devicecopy.LoadHost(ctx, ck, plan); !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("cancelled: %v, %v", res, err)
	}
}

// A truncated copy fails with an error naming the storage, never a panic.
func TestLoadHostTruncated(t *testing.T) {
	b, err := os.ReadFile(fixtures + "legacy.pt")
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(b) - 1, len(b) - 10, len(b) - 100} {
		ck, err := statedict.NewReader(bytes.NewReader(b[:cut]), int64(cut))
		if err != nil {
			continue // refused at open: fine
		}
		plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := devicecopy.LoadHost(context.Background(), ck, plan); err == nil || !strings.Contains(err.Error(), "reading storage") {
			t.Errorf("cut at %d: %v", cut, err)
		}
	}
}

// interopScript prints, for each checkpoint path on stdin, torch.load's
// tensors (map_location='cpu') as name -> base64 of their contiguous bytes,
// names built as statedict builds them.
const interopScript = `
import base64, json, sys, torch
def flat(obj, prefix, out):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().contiguous()
        if t.dtype in (torch.bfloat16, torch.float16):
            t = t.view(torch.int16)
        elif t.dtype == torch.complex32:
            t = t.view(torch.int32)
        out[prefix] = base64.b64encode(t.numpy().tobytes()).decode()
    elif isinstance(obj, dict):
        for k, v in obj.items():
            flat(v, (prefix + "." if prefix else "") + str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            flat(v, (prefix + "." if prefix else "") + str(i), out)
res = {}
for p in json.load(sys.stdin):
    out = {}
    flat(torch.load(p, map_location="cpu", weights_only=False), "", out)
    res[p] = out
json.dump(res, sys.stdout)
`

// interopFixtures are the fixtures torch 1.13 loads, with plain dense
// tensors (quantized, sparse, big-endian and new-dtype files excluded).
var interopFixtures = []string{
	"zip_basic.pt", "zip_archive.pt", "zip_v21.pt", "zip_dataversion.pt", "zip_deflated.pt", "zip64.pt", "legacy.pt",
	"tar.pt", "tied.pt", "params.pt", "training.pt", "cuda_tagged.pt", "cuda_training.pt", "cuda_bare.pt",
	"dtypes_classic.pt", "root_tensor.pt",
}

func TestInteropLoadHost(t *testing.T) {
	testenv.Require(t, "torch", "numpy")
	paths := make([]string, len(interopFixtures))
	for i, f := range interopFixtures {
		paths[i] = fixtures + f
	}
	req, _ := json.Marshal(paths)
	cmd := exec.Command(testenv.Python(), "-c", interopScript)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("torch: %v\n%s", err, stderr.String())
	}
	var torchTensors map[string]map[string]string
	if err := json.Unmarshal(out, &torchTensors); err != nil {
		t.Fatal(err)
	}
	for _, f := range interopFixtures {
		t.Run(f, func(t *testing.T) {
			want := torchTensors[fixtures+f]
			ck := openFixture(t, f)
			res := loadCPU(t, ck)
			var names []string
			for _, ht := range res.Tensors {
				names = append(names, ht.Tensor.Name)
				exp, ok := want[ht.Tensor.Name]
				if !ok {
					t.Errorf("%q: not a tensor in torch.load's result", ht.Tensor.Name)
					continue
				}
				got, err := ht.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				if base64.StdEncoding.EncodeToString(got) != exp {
					t.Errorf("%q (%s %v): bytes differ from torch", ht.Tensor.Name, ht.Tensor.DType, ht.Tensor.Shape)
				}
			}
			if len(names) != len(want) || len(names) == 0 {
				torchNames := make([]string, 0, len(want))
				for n := range want {
					torchNames = append(torchNames, n)
				}
				sort.Strings(torchNames)
				t.Errorf("loaded %v, torch has %v", names, torchNames)
			}
		})
	}
}

// LoadHost reads a checkpoint into host memory, checking each record's
// CRC32 and computing the digest the GPU will verify after upload.
func ExampleLoadHost() {
	ck, err := statedict.Open("../testdata/fixtures/tied.pt")
	if err != nil {
		panic(err)
	}
	defer ck.Close()
	plan, _ := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
	res, err := devicecopy.LoadHost(context.Background(), ck, plan)
	if err != nil {
		panic(err)
	}
	defer res.Release()
	fmt.Println(len(res.Tensors), "tensors,", len(res.Storages), "storages,", res.Bytes, "bytes")
	s := res.Storages[0]
	fmt.Println(s.Tensors[:2], s.CRCChecked, s.Digest == digest.SumBytes(s.Data))
	// Output:
	// 8 tensors, 4 storages, 52 bytes
	// [embed.weight lm_head.weight] true true
}

// FuzzLoadHost loads mutated fixtures: whatever the reader accepts must load
// or fail cleanly, and every loaded tensor's bytes must be readable.
func FuzzLoadHost(f *testing.F) {
	for _, name := range []string{"zip_basic.pt", "tied.pt", "legacy.pt", "tar.pt", "zip_bigendian.pt", "zip_deflated.pt", "quantized.pt", "model.safetensors"} {
		b, err := os.ReadFile(fixtures + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := statedict.NewReader(bytes.NewReader(b), int64(len(b)), statedict.WithTempDir(t.TempDir()), statedict.WithMaxDecompressedSize(1<<20))
		if err != nil {
			return
		}
		defer ck.Close()
		plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
		if err != nil {
			return
		}
		res, err := devicecopy.LoadHost(context.Background(), ck, plan, devicecopy.WithMaxHostBytes(1<<24))
		if err != nil {
			return
		}
		for _, ht := range res.Tensors {
			got, err := ht.Bytes()
			if err == nil && int64(len(got)) != ht.Tensor.NBytes() {
				t.Fatalf("%q: %d bytes, want %d", ht.Tensor.Name, len(got), ht.Tensor.NBytes())
			}
		}
	})
}

// writeSafetensors writes n uint8 tensors of size bytes each, with
// pseudo-random contents, and returns the file's path.
func writeSafetensors(b testing.TB, n int, size int64) string {
	b.Helper()
	header := map[string]any{}
	for i := range n {
		header[fmt.Sprintf("t%02d", i)] = map[string]any{"dtype": "U8", "shape": []int64{size}, "data_offsets": []int64{int64(i) * size, int64(i+1) * size}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		b.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	path := filepath.Join(b.TempDir(), "bench.safetensors")
	w, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(h)))
	w.Write(lenBuf[:])
	w.Write(h)
	buf := make([]byte, 1<<20)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range buf {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		buf[i] = byte(x)
	}
	for range int64(n) * size / int64(len(buf)) {
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkLoadHost loads a generated 1 GiB file (16 tensors of 64 MiB)
// with LoadHost (read + xxh64c; safetensors has no CRC32), against the
// floor: the same file read sequentially with plain os.File reads into one
// reused 4 MiB buffer. Both read from the page cache after the first pass.
func BenchmarkLoadHost(b *testing.B) {
	const n, size = 16, 64 << 20
	path := writeSafetensors(b, n, size)
	b.Run("LoadHost", func(b *testing.B) {
		ck, err := statedict.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer ck.Close()
		plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(n * size)
		for b.Loop() {
			res, err := devicecopy.LoadHost(context.Background(), ck, plan)
			if err != nil {
				b.Fatal(err)
			}
			res.Release()
		}
	})
	// What holding the data costs without checking it: one fresh buffer
	// per storage, filled by sequential reads.
	b.Run("ReadIntoNewBuffers", func(b *testing.B) {
		b.SetBytes(n * size)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			bufs := make([][]byte, n)
			for i := range bufs {
				bufs[i] = make([]byte, size)
				if _, err := io.ReadFull(f, bufs[i]); err != nil {
					b.Fatal(err)
				}
			}
			f.Close()
		}
	})
	b.Run("SequentialRead", func(b *testing.B) {
		buf := make([]byte, 4<<20)
		b.SetBytes(n * size)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}

// countingReaderAt counts the ReadAt calls made on r and the bytes they ask
// for.
type countingReaderAt struct {
	r            io.ReaderAt
	mu           sync.Mutex
	calls, small int // small: calls asking for less than 8 MiB
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.calls++
	if len(p) < 8<<20 {
		c.small++
	}
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

// TestLoadHostReadsLargeRanges checks that LoadHost reads storages held in
// place with a few large ReadAt calls straight into their buffers, not 1 MiB
// at a time: an object store (objstore.Object) serves reads of 8 MiB and more
// with parallel ranged GETs into the caller's buffer, smaller ones through
// its chunk cache, one copy and one chunk at a time.
func TestLoadHostReadsLargeRanges(t *testing.T) {
	const n, size = 4, 16 << 20
	data, err := os.ReadFile(writeSafetensors(t, n, size))
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReaderAt{r: bytes.NewReader(data)}
	ck, err := statedict.NewReader(cr, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
	if err != nil {
		t.Fatal(err)
	}
	cr.mu.Lock()
	cr.calls, cr.small = 0, 0
	cr.mu.Unlock()
	res, err := devicecopy.LoadHost(context.Background(), ck, plan)
	if err != nil {
		t.Fatal(err)
	}
	// 64 MiB in 16 MiB segments: 4 reads. Reading 1 MiB pieces made 64.
	if cr.calls > n*(size/(16<<20)) || cr.small > 0 {
		t.Errorf("LoadHost made %d ReadAt calls (%d of less than 8 MiB) for %d storages of %d MiB; want at most %d, none small",
			cr.calls, cr.small, n, size>>20, n*(size/(16<<20)))
	}
	body := data[len(data)-n*size:]
	for i, hs := range res.Storages {
		want := body[int64(i)*size : int64(i+1)*size]
		if !bytes.Equal(hs.Data, want) {
			t.Fatalf("storage %d: wrong bytes", i)
		}
		d, _ := digest.New(size)
		d.Write(want)
		if w, _ := d.Sum(); hs.Digest != w {
			t.Fatalf("storage %d: digest %v, want %v", i, hs.Digest, w)
		}
	}
}

// failingReaderAt fails every read that reaches past byte at.
type failingReaderAt struct {
	r  io.ReaderAt
	at int64
}

var errInjected = errors.New("injected read failure")

func (f failingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.at {
		return 0, errInjected
	}
	return f.r.ReadAt(p, off)
}

// TestLoadHostSegmentReadError checks that a failed segment read (a storage
// read in large segments, several in flight) ends the load with an error
// naming the storage and wrapping the cause, and that a cancelled context
// ends it with the context's error.
func TestLoadHostSegmentReadError(t *testing.T) {
	const n, size = 2, 40 << 20
	data, err := os.ReadFile(writeSafetensors(t, n, size))
	if err != nil {
		t.Fatal(err)
	}
	load := func(ctx context.Context, r io.ReaderAt) error {
		ck, err := statedict.NewReader(r, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		plan, err := remap.NewPlan(ck.Tensors, remap.To(remap.Device{Type: "cpu", Index: -1}))
		if err != nil {
			t.Fatal(err)
		}
		res, err := devicecopy.LoadHost(ctx, ck, plan)
		if err == nil {
			res.Release()
		}
		return err
	}
	err = load(context.Background(), failingReaderAt{r: bytes.NewReader(data), at: int64(len(data)) - size/2})
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "storage") || !strings.Contains(err.Error(), "t01") {
		t.Fatalf("load with a failing read: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := load(ctx, bytes.NewReader(data)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled load: %v", err)
	}
}
