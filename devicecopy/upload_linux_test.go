package devicecopy

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// The tests in this file run Upload against the fake libcuda, whose
// cuLaunchKernel runs the checksum kernel's own source over fake device
// memory (see testdata/fakecuda.c).

var cuda0 = remap.Device{Type: "cuda", Index: 0}

func openCk(t *testing.T, path string) *statedict.Checkpoint {
	t.Helper()
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func planFor(t *testing.T, ck *statedict.Checkpoint, rules remap.Rules) *remap.Plan {
	t.Helper()
	p, err := remap.NewPlan(ck.Tensors, rules)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// usage is everything the fake driver counts as held.
type usage struct {
	allocs    [2]int32
	used      [2]uint64
	free      [2]uint64
	refs      [2]int32
	host      int32
	streams   int32
	events    int32
	modules   int32
	launchesN int32
}

func snapshot(t *testing.T, d *cuda.Driver) usage {
	t.Helper()
	var u usage
	for dev := range 2 {
		u.allocs[dev] = fake.DeviceAllocs(int32(dev))
		u.used[dev] = fake.DeviceUsed(int32(dev))
		u.refs[dev] = fake.Refs(int32(dev))
		c, err := d.PrimaryContext(dev)
		if err != nil {
			t.Fatal(err)
		}
		if u.free[dev], _, err = c.MemGetInfo(); err != nil {
			t.Fatal(err)
		}
		c.Release()
	}
	u.host, u.streams, u.events, u.modules = fake.HostAllocs(), fake.Streams(), fake.Events(), fake.Modules()
	return u
}

// checkReleased fails unless the fake holds exactly what it held at before
// (launches aside): every allocation, stream, event, module and context
// reference of the upload was given back, and cuMemGetInfo agrees.
func checkReleased(t *testing.T, d *cuda.Driver, before usage) {
	t.Helper()
	after := snapshot(t, d)
	if after != before {
		t.Errorf("resources not released:\nbefore %+v\nafter  %+v", before, after)
	}
}

// writeSafetensors writes tensors (name -> float32 values) as a
// safetensors file and returns its path.
func writeSafetensors(t *testing.T, tensors map[string][]float32) string {
	t.Helper()
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	slices.Sort(names)
	header := map[string]any{}
	var data bytes.Buffer
	for _, n := range names {
		start := data.Len()
		binary.Write(&data, binary.LittleEndian, tensors[n])
		header[n] = map[string]any{"dtype": "F32", "shape": []int{len(tensors[n])}, "data_offsets": []int{start, data.Len()}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	var f bytes.Buffer
	binary.Write(&f, binary.LittleEndian, uint64(len(h)))
	f.Write(h)
	f.Write(data.Bytes())
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, f.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func randomFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()
	}
	return v
}

// bigModel has storages of many sizes around the 64 KiB chunk and larger
// than the staging buffers.
func bigModel(t *testing.T) string {
	rng := rand.New(rand.NewPCG(5, 6))
	return writeSafetensors(t, map[string][]float32{
		"a.empty": {},
		"b.one":   {1.5},
		"c.chunk": randomFloats(rng, digest.ChunkSize/4),
		"d.big":   randomFloats(rng, 300_001),
		"e.odd":   randomFloats(rng, digest.ChunkSize/4+3),
	})
}

// deviceBytes copies n bytes at p back from the device.
func deviceBytes(t *testing.T, d *cuda.Driver, dev int, p cuda.DevicePtr, n int64) []byte {
	t.Helper()
	c, err := d.PrimaryContext(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	b := make([]byte, n)
	if err := c.MemcpyDtoH(b, p); err != nil {
		t.Fatal(err)
	}
	return b
}

// checkState compares every uploaded tensor with what LoadHost reads for
// it, and every storage's digests with the host's.
func checkState(t *testing.T, d *cuda.Driver, ck *statedict.Checkpoint, st *DeviceState) {
	t.Helper()
	cpu := planFor(t, ck, remap.To(remap.Device{Type: "cpu", Index: -1}))
	host, err := LoadHost(context.Background(), ck, cpu)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tensors) == 0 {
		t.Fatal("nothing uploaded")
	}
	for _, dt := range st.Tensors {
		ht, ok := host.Tensor(dt.Name)
		if !ok {
			t.Fatalf("%s: not loaded on the host", dt.Name)
		}
		if dt.Ptr != dt.Storage.Ptr+cuda.DevicePtr(dt.Offset*int64(dt.DType.Size())) || dt.Storage.Ptr%arenaAlign != 0 {
			t.Errorf("%s: pointer %#x, storage at %#x, offset %d", dt.Name, dt.Ptr, dt.Storage.Ptr, dt.Offset)
		}
		if ht.Storage.Digest != dt.Storage.FileDigest {
			t.Errorf("%s: file digest %v, LoadHost %v", dt.Name, dt.Storage.FileDigest, ht.Storage.Digest)
		}
		// The whole storage on the device, little-endian.
		dev := deviceBytes(t, d, dt.Device.Index, dt.Storage.Ptr, dt.Storage.Storage.NBytes)
		if got := digest.SumBytes(dev); got != dt.Storage.UploadDigest || got != dt.Storage.DeviceDigest {
			t.Errorf("%s: device bytes hash to %v, upload digest %v, kernel %v", dt.Name, got, dt.Storage.UploadDigest, dt.Storage.DeviceDigest)
		}
		if !dt.Storage.Swapped && !bytes.Equal(dev, ht.Storage.Data) {
			t.Errorf("%s: device storage differs from the file's", dt.Name)
		}
		if !dt.Storage.Swapped && dt.Storage.FileDigest != dt.Storage.UploadDigest {
			t.Errorf("%s: unswapped storage with two digests", dt.Name)
		}
		if dt.Storage.CRCChecked != ht.Storage.CRCChecked {
			t.Errorf("%s: CRC checked %v, LoadHost %v", dt.Name, dt.Storage.CRCChecked, ht.Storage.CRCChecked)
		}
		want, err := ht.Bytes()
		if err != nil || !ht.Tensor.IsContiguous() {
			continue // views LoadHost refuses to materialise
		}
		if got := deviceBytes(t, d, dt.Device.Index, dt.Ptr, dt.Bytes); !bytes.Equal(got, want) {
			t.Errorf("%s: device elements differ from the logical little-endian elements", dt.Name)
		}
	}
}

func TestUploadFixtures(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Copies and kernels land only when waited for, as on a GPU.
	fake.Async(1)
	defer fake.Async(0)
	big := bigModel(t)
	for _, name := range []string{"zip_basic.pt", "tied.pt", "zip_bigendian.pt", "zip_deflated.pt", "legacy.pt", "tar.pt",
		"training.pt", "quantized.pt", "sparse.pt", "model.safetensors", "sharded_st", big} {
		for _, verify := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/verify=%v", filepath.Base(name), verify), func(t *testing.T) {
				path := name
				if !strings.HasPrefix(name, "/") {
					path = fixtureDir + name
				}
				ck := openCk(t, path)
				before := snapshot(t, d)
				launches := fake.Launches()
				opts := []UploadOption{WithDriver(d), WithStaging(2, 64<<10), WithHashConcurrency(3)}
				if !verify {
					opts = append(opts, WithoutVerify())
				}
				var last int64
				opts = append(opts, WithUploadProgress(func(done, total int64) {
					if done <= last || done > total {
						t.Errorf("progress %d of %d after %d", done, total, last)
					}
					last = done
				}))
				st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), opts...)
				if err != nil {
					t.Fatal(err)
				}
				if last != st.Bytes {
					t.Errorf("progress ended at %d of %d", last, st.Bytes)
				}
				if st.Verified != verify || len(st.Arenas) != 1 || st.Arenas[0].Bytes != st.Bytes {
					t.Errorf("verified %v, arenas %+v, bytes %d", st.Verified, st.Arenas, st.Bytes)
				}
				ran := fake.Launches() - launches
				if !verify {
					if ran != 0 {
						t.Errorf("%d kernel launches without verification", ran)
					}
					if err := st.Verify(context.Background()); err != nil {
						t.Fatal(err)
					}
				} else if ran == 0 {
					t.Error("no kernel launched")
				}
				checkState(t, d, ck, st)
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Errorf("second Close: %v", err)
				}
				checkReleased(t, d, before)
				if err := st.Verify(context.Background()); !errors.Is(err, ErrClosed) {
					t.Errorf("Verify after Close: %v", err)
				}
			})
		}
	}
}

func TestUploadSharedAndSwapped(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	ck := openCk(t, fixtureDir+"tied.pt")
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	shared := ck.SharedStorages()
	if len(shared) == 0 {
		t.Fatal("tied.pt shares no storage")
	}
	if len(st.Storages) != len(ck.Storages) {
		t.Errorf("%d storages uploaded, the file has %d", len(st.Storages), len(ck.Storages))
	}
	for s, names := range shared {
		var ptrs []cuda.DevicePtr
		for _, n := range names {
			dt, ok := st.Tensor(n)
			if !ok {
				t.Fatalf("%s not uploaded", n)
			}
			ptrs = append(ptrs, dt.Storage.Ptr)
		}
		if len(slices.Compact(ptrs)) != 1 {
			t.Errorf("storage %s uploaded at %v", s.Key, ptrs)
		}
	}

	ck = openCk(t, fixtureDir+"zip_bigendian.pt")
	st2, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	swapped := 0
	for _, ds := range st2.Storages {
		if ds.Swapped {
			swapped++
			if ds.FileDigest == ds.UploadDigest {
				t.Errorf("storage %s: swapped, but the file and upload digests agree", ds.Storage.Key)
			}
		}
	}
	if swapped == 0 {
		t.Error("no storage of zip_bigendian.pt was swapped")
	}
}

func TestUploadTwoDevices(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	ck := openCk(t, fixtureDir+"cuda_tagged.pt")
	rules, err := remap.Parse("cpu=cuda:1")
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, d)
	st, err := Upload(context.Background(), ck, planFor(t, ck, rules), WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Arenas) != 2 || st.Arenas[0].Device != cuda0 || st.Arenas[1].Device.Index != 1 {
		t.Fatalf("arenas %+v", st.Arenas)
	}
	if n := fake.DeviceAllocs(0) + fake.DeviceAllocs(1); n != before.allocs[0]+before.allocs[1]+2 {
		t.Errorf("%d device allocations, want one per device", n)
	}
	for _, dt := range st.Tensors {
		if want := ck.Tensor(dt.Name).Device; want != "cpu" && dt.Device.String() != want || want == "cpu" && dt.Device.Index != 1 {
			t.Errorf("%s (saved on %s) uploaded to %s", dt.Name, want, dt.Device)
		}
	}
	checkState(t, d, ck, st)
	st.Close()
	checkReleased(t, d, before)
}

// TestUploadCorruption plants damage in fake device memory after an upload
// and checks that verification names the tensor, device and chunk.
func TestUploadCorruption(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	fake.Async(1)
	defer fake.Async(0)
	ck := openCk(t, bigModel(t))
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(remap.Device{Type: "cuda", Index: 1})), WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dt, _ := st.Tensor("d.big")
	c, err := d.PrimaryContext(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	flip := func(off int64) {
		b := deviceBytes(t, d, 1, dt.Ptr+cuda.DevicePtr(off), 1)
		if err := c.MemsetD8(dt.Ptr+cuda.DevicePtr(off), b[0]^0x10, 1); err != nil {
			t.Fatal(err)
		}
		// cuMemsetD8 runs on the legacy stream, which does not order
		// with the non-blocking verify stream: wait for it.
		if err := c.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	flip(3*digest.ChunkSize + 12345)
	flip(17*digest.ChunkSize + 1)
	err = st.Verify(context.Background())
	var ve *VerifyError
	if !errors.Is(err, ErrVerify) || !errors.As(err, &ve) || len(ve.Mismatches) != 1 {
		t.Fatalf("Verify after corruption: %v", err)
	}
	m := ve.Mismatches[0]
	if m.Kind != MismatchDevice || !slices.Equal(m.Tensors, []string{"d.big"}) || m.Device.String() != "cuda:1" ||
		!slices.Equal(m.Chunks, []int64{3, 17}) || m.BadChunks != 2 || m.Want == m.Got {
		t.Errorf("mismatch %+v", m)
	}
	for _, want := range []string{"tensor d.big", "on cuda:1", "chunk 3 (bytes 196608-262143), 17 (bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if st.Verified {
		t.Error("Verified after a mismatch")
	}
	// Undo the damage: verification passes again.
	flip(3*digest.ChunkSize + 12345)
	flip(17*digest.ChunkSize + 1)
	if err := st.Verify(context.Background()); err != nil || !st.Verified {
		t.Errorf("Verify after repair: %v", err)
	}
}

func TestUploadSavedDigests(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := bigModel(t)
	ck := openCk(t, path)
	saved := map[string]digest.Value{}
	for _, tn := range ck.Tensors {
		ra, err := tn.Storage.ReaderAt()
		if err != nil {
			t.Fatal(err)
		}
		if saved[tn.Name], err = digest.Sum(context.Background(), ra, tn.Storage.NBytes); err != nil {
			t.Fatal(err)
		}
	}
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithSavedDigests(saved))
	if err != nil {
		t.Fatalf("correct saved digests: %v", err)
	}
	st.Close()
	before := snapshot(t, d)
	saved["c.chunk"]++
	_, err = Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithSavedDigests(saved))
	var ve *VerifyError
	if !errors.As(err, &ve) || len(ve.Mismatches) != 1 || ve.Mismatches[0].Kind != MismatchSaved ||
		!slices.Equal(ve.Mismatches[0].Tensors, []string{"c.chunk"}) || ve.Mismatches[0].Want != saved["c.chunk"] {
		t.Errorf("wrong saved digest: %v", err)
	}
	checkReleased(t, d, before)
}

// TestUploadFailureReleases fails uploads in the middle in every way the
// fake allows and checks that nothing stays allocated on any device.
func TestUploadFailureReleases(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("oom on the second device", func(t *testing.T) {
		ck := openCk(t, fixtureDir+"cuda_tagged.pt")
		before := snapshot(t, d)
		fake.FailAlloc(1)
		defer fake.FailAlloc(-1)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.Rules{}), WithDriver(d))
		if !errors.Is(err, cuda.ErrOutOfMemory) || !strings.Contains(err.Error(), "cuda:1") {
			t.Errorf("err = %v", err)
		}
		checkReleased(t, d, before)
	})
	t.Run("cancelled", func(t *testing.T) {
		ck := openCk(t, bigModel(t))
		before := snapshot(t, d)
		ctx, cancel := context.WithCancel(context.Background())
		_, err := Upload(ctx, ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithStaging(2, 64<<10),
			WithUploadProgress(func(done, total int64) {
				if done > total/2 {
					cancel()
				}
			}))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
		checkReleased(t, d, before)
	})
	t.Run("crc", func(t *testing.T) {
		path := corruptRecord(t, fixtureDir+"zip_basic.pt")
		ck := openCk(t, path)
		before := snapshot(t, d)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
		var ce *CRCError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCRC) {
			t.Errorf("err = %v", err)
		}
		checkReleased(t, d, before)
	})
	t.Run("read error", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "m.safetensors")
		b, err := os.ReadFile(bigModel(t))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(path, b, 0o600)
		ck := openCk(t, path)
		// The file shrinks after it was opened: the last storage cannot be read.
		if err := os.Truncate(path, int64(len(b)-1000)); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, d)
		_, err = Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithStaging(2, 64<<10))
		if err == nil || !strings.Contains(err.Error(), "reading storage") {
			t.Errorf("err = %v", err)
		}
		checkReleased(t, d, before)
	})
	t.Run("bad plan", func(t *testing.T) {
		ck := openCk(t, fixtureDir+"zip_basic.pt")
		other := openCk(t, fixtureDir+"tied.pt")
		if _, err := Upload(context.Background(), ck, planFor(t, other, remap.Rules{}), WithDriver(d)); !errors.Is(err, ErrPlanMismatch) {
			t.Errorf("err = %v", err)
		}
	})
}

// corruptRecord copies a torch zip file with one byte of its first data
// record changed, leaving the recorded CRC32 as it was.
func corruptRecord(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if strings.Contains(f.Name, "/data/") && f.UncompressedSize64 > 0 && f.Method == zip.Store {
			off, err := f.DataOffset()
			if err != nil {
				t.Fatal(err)
			}
			b[off] ^= 0xff
			out := filepath.Join(t.TempDir(), "damaged.pt")
			if err := os.WriteFile(out, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatal("no stored data record")
	return ""
}

func TestUploadCPUOnlyPlan(t *testing.T) {
	ck := openCk(t, fixtureDir+"zip_basic.pt")
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(remap.Device{Type: "cpu", Index: -1})))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tensors) != 0 || len(st.Skipped) != len(ck.Tensors) || len(st.Arenas) != 0 {
		t.Errorf("cpu plan: %+v", st)
	}
	st.Close()
}

// TestUploadHostileLayout checks that sizes and views that do not fit are
// refused before anything is allocated.
func TestUploadHostileLayout(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	huge := func(name string, n int64) (*statedict.Tensor, *statedict.Storage) {
		s := &statedict.Storage{Key: name, Location: "cuda:0", DType: dtype.Float32, NBytes: n}
		return &statedict.Tensor{Name: name, DType: dtype.Float32, Shape: []int64{n / 4}, Strides: []int64{1}, Device: "cuda:0", Storage: s}, s
	}
	t1, s1 := huge("a", 1<<55)
	t2, s2 := huge("b", 1<<55+4)
	t3, s3 := huge("c", 16)
	t3.Offset = 3 // elements 3..6 of a 4-element storage
	t4, s4 := huge("d", 16)
	t4.Strides = []int64{-1}
	for _, c := range []struct {
		ts []*statedict.Tensor
		ss []*statedict.Storage
	}{{[]*statedict.Tensor{t1, t2}, []*statedict.Storage{s1, s2}}, {[]*statedict.Tensor{t3}, []*statedict.Storage{s3}}, {[]*statedict.Tensor{t4}, []*statedict.Storage{s4}}} {
		ck := &statedict.Checkpoint{Tensors: c.ts, Storages: c.ss}
		before := snapshot(t, d)
		if _, err := Upload(context.Background(), ck, planFor(t, ck, remap.Rules{}), WithDriver(d)); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: %v", c.ts[0].Name, err)
		}
		checkReleased(t, d, before)
	}
}

// TestUploadPiecesCRC uploads a torch zip whose storages span many staging
// buffers, read by several readers at once: each storage's CRC32 is
// combined from its pieces' chunks, so a correct file passes with every
// record checked and the device holding its bytes, and one damaged byte in
// a middle piece of a middle storage is a *CRCError for that storage.
func TestUploadPiecesCRC(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := openCk(t, bigModel(t))
	pth := filepath.Join(t.TempDir(), "model.pt")
	if _, err := convert.Convert(context.Background(), src, pth); err != nil {
		t.Fatal(err)
	}
	opts := []UploadOption{WithDriver(d), WithStaging(8, 64<<10), WithHashConcurrency(5)}
	ck := openCk(t, pth)
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	var big *DeviceStorage
	for _, ds := range st.Storages {
		if ds.Storage.NBytes > 0 && !ds.CRCChecked {
			t.Errorf("storage %s: CRC32 not checked", ds.Storage.Key)
		}
		if ds.Storage.NBytes > 1<<20 {
			big = ds
		}
		raw, err := ds.Storage.ReaderAt()
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, ds.Storage.NBytes)
		if n, err := raw.ReadAt(want, 0); n != len(want) {
			t.Fatal(err)
		}
		if got := deviceBytes(t, d, 0, ds.Ptr, ds.Storage.NBytes); !bytes.Equal(got, want) {
			t.Errorf("storage %s: device bytes differ from the file's", ds.Storage.Key)
		}
	}
	st.Close()
	if big == nil {
		t.Fatal("no storage over 1 MiB")
	}

	b, err := os.ReadFile(pth)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for _, f := range zr.File {
		if f.Name == big.Storage.Record {
			if off, err = f.DataOffset(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if off < 0 {
		t.Fatalf("no record %s", big.Storage.Record)
	}
	b[off+big.Storage.NBytes/2+7] ^= 0x10 // inside a middle 64 KiB piece
	damaged := filepath.Join(t.TempDir(), "damaged.pt")
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	ck = openCk(t, damaged)
	before := snapshot(t, d)
	_, err = Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), opts...)
	var ce *CRCError
	if !errors.As(err, &ce) || ce.Storage != big.Storage.Key || ce.Want != big.Storage.CRC32 {
		t.Fatalf("err = %v, want a CRC error for storage %s", err, big.Storage.Key)
	}
	checkReleased(t, d, before)
}
