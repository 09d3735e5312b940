package ckpt_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/objstore"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
)

const fixtures = "testdata/fixtures/"

// fakeInventory is a cuda.Inventory with canned answers.
type fakeInventory struct{ devs []cuda.DeviceInfo }

func (f fakeInventory) Devices(context.Context) ([]cuda.DeviceInfo, error) { return f.devs, nil }

func TestOpenSources(t *testing.T) {
	ctx := context.Background()
	for _, src := range []string{fixtures + "zip_basic.pt", fixtures + "sharded_st", "file://" + fixtures + "zip_basic.pt"} {
		ck, err := ckpt.Open(ctx, src)
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if len(ck.Tensors) == 0 {
			t.Errorf("%s: no tensors", src)
		}
		ck.Close()
	}
	for _, src := range []string{"ftp://host/key.pt", "FTP://host/x.safetensors", ""} {
		_, err := ckpt.Open(ctx, src)
		if !errors.Is(err, ckpt.ErrUnsupportedSource) {
			t.Errorf("%q: got %v, want ErrUnsupportedSource", src, err)
		}
	}
	if _, err := ckpt.Open(ctx, "abfs://container/key.pt"); !errors.Is(err, objstore.ErrUnsupportedScheme) {
		t.Errorf("abfs://: got %v, want objstore.ErrUnsupportedScheme", err)
	}
	// An http:// source (a loopback file server: Range requests) opens
	// through objstore, and WithObjectStore hands over its store.
	srv := httptest.NewServer(http.FileServer(http.Dir(fixtures)))
	defer srv.Close()
	var st *objstore.Store
	ck, err := ckpt.Open(ctx, srv.URL+"/zip_basic.pt", ckpt.WithObjectStore(func(s *objstore.Store) { st = s }))
	if err != nil {
		t.Fatalf("http source: %v", err)
	}
	local, err := ckpt.Open(ctx, fixtures+"zip_basic.pt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ck.Tensors) != len(local.Tensors) || len(ck.Tensors) == 0 || st == nil || st.Requests() == 0 {
		t.Errorf("http source: %d tensors (local %d), store %v", len(ck.Tensors), len(local.Tensors), st)
	}
	ck.Close()
	local.Close()
	// A path with a colon but no "//" is a path, not a URL.
	if _, err := ckpt.Open(ctx, "c:model.pt"); errors.Is(err, ckpt.ErrUnsupportedSource) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("c:model.pt: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := ckpt.Open(cctx, fixtures+"zip_basic.pt"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// Errors of the packages underneath reach the caller for errors.Is/As.
func TestLoadErrorsPassThrough(t *testing.T) {
	ctx := context.Background()
	_, err := ckpt.Load(ctx, fixtures+"bad/unsafe_os_system.pt")
	if !errors.Is(err, pickle.ErrUnsafe) {
		t.Errorf("unsafe: %v", err)
	}
	_, err = ckpt.Load(ctx, fixtures+"zip_basic.pt", ckpt.WithMapLocation("cuda1"))
	var re *remap.RuleError
	if !errors.Is(err, remap.ErrDevice) || !errors.As(err, &re) {
		t.Errorf("bad rules: %v", err)
	}
	_, err = ckpt.Load(ctx, fixtures+"zip_basic.pt", ckpt.WithMapLocation("cuda:3"),
		ckpt.WithInventory(fakeInventory{devs: []cuda.DeviceInfo{{Ordinal: 0, FreeMemory: 1 << 30}}}),
		ckpt.WithEnv(cuda.Environment(func(string) (string, bool) { return "", false })))
	var md *devicecopy.MissingDeviceError
	if !errors.Is(err, devicecopy.ErrPreflight) || !errors.As(err, &md) {
		t.Errorf("missing GPU: %v", err)
	}
	_, err = ckpt.Load(ctx, fixtures+"zip_basic.pt", ckpt.WithMaxHostBytes(10))
	var le *devicecopy.LimitError
	if !errors.Is(err, devicecopy.ErrHostLimit) || !errors.As(err, &le) || le.Needed != 139 {
		t.Errorf("limit: %v", err)
	}
	_, err = ckpt.Load(ctx, fixtures+"no-such-file.pt")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadHostTensors(t *testing.T) {
	var stages []ckpt.Progress
	m, err := ckpt.Load(context.Background(), fixtures+"tied.pt", ckpt.WithMapLocation("cpu"), ckpt.WithConcurrency(2),
		ckpt.WithProgress(func(p ckpt.Progress) { stages = append(stages, p) }))
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) == 0 || stages[len(stages)-1].Stage != ckpt.StageHost || stages[len(stages)-1].Done != stages[len(stages)-1].Total {
		t.Errorf("progress: %+v", stages)
	}
	if m.Preflight == nil || m.Host == nil || m.Device != nil {
		t.Fatalf("model: preflight %v host %v device %v", m.Preflight, m.Host, m.Device)
	}
	embed, _ := m.Tensor("embed.weight")
	head, _ := m.Tensor("lm_head.weight")
	a, err := ckpt.View[float32](embed)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ckpt.View[float32](head)
	if len(a) != 12 || &a[0] != &b[0] {
		t.Errorf("tied weights are not one zero-copy view: %d elements", len(a))
	}
	raw, _ := embed.Bytes()
	if &raw[0] != (*byte)(unsafePointer(&a[0])) {
		t.Error("View copied the bytes")
	}
	tr, _ := m.Tensor("transpose")
	if _, err := ckpt.View[float32](tr); !errors.Is(err, ckpt.ErrNotContiguous) {
		t.Errorf("transpose: %v", err)
	}
	if b, err := tr.Bytes(); err != nil || len(b) != 48 {
		t.Errorf("transpose bytes: %d, %v", len(b), err)
	}
	if _, err := ckpt.View[int64](embed); !errors.Is(err, ckpt.ErrDType) {
		t.Errorf("int64 of float32: %v", err)
	}
	empty, _ := m.Tensor("empty")
	if v, err := ckpt.View[float32](empty); err != nil || len(v) != 0 {
		t.Errorf("empty: %v %v", v, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := ckpt.View[float32](embed); !errors.Is(err, ckpt.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if _, err := embed.Bytes(); !errors.Is(err, ckpt.ErrClosed) {
		t.Errorf("Bytes after Close: %v", err)
	}
}

func TestViewBigEndian(t *testing.T) {
	m, err := ckpt.Load(context.Background(), fixtures+"zip_bigendian.pt", ckpt.WithMapLocation("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w, _ := m.Tensor("w")
	_, err = ckpt.View[float32](w)
	var ve *ckpt.ViewError
	if !errors.Is(err, ckpt.ErrByteOrder) || !errors.As(err, &ve) || ve.Tensor != "w" {
		t.Fatalf("big-endian view: %v", err)
	}
	b, err := w.Bytes() // swapped copy
	if err != nil || len(b) != 24 {
		t.Fatalf("bytes: %d %v", len(b), err)
	}
}

// GPU targets are planned and checked but have no host bytes; a dry run
// reads nothing.
func TestLoadDryRunAndFilter(t *testing.T) {
	ctx := context.Background()
	m, err := ckpt.Load(ctx, fixtures+"cuda_tagged.pt", ckpt.WithDryRun(),
		ckpt.WithFilter(func(n string) bool { return n != "stray" }), ckpt.WithStrict())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.Tensors) != 4 || m.Preflight != nil || m.Host != nil {
		t.Fatalf("dry run: %d tensors, preflight %v", len(m.Tensors), m.Preflight)
	}
	g, _ := m.Tensor("gpu1.weight")
	if g.Device.String() != "cuda:1" || g.OnHost() {
		t.Errorf("gpu1.weight: %v on host %v", g.Device, g.OnHost())
	}
	if _, err := ckpt.View[uint16](g); !errors.Is(err, ckpt.ErrNotOnHost) {
		t.Errorf("view of a GPU tensor: %v", err)
	}
	if _, ok := g.DevicePtr(); ok {
		t.Error("dry run has a device pointer")
	}
}

// Save-time digests recorded by convert are checked on a host load, as on
// an upload: a flipped byte fails with a MismatchSaved.
func TestLoadSavedDigests(t *testing.T) {
	ctx := context.Background()
	ck, err := statedict.Open(fixtures + "zip_basic.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if _, err := convert.Convert(ctx, ck, out, convert.WithFormat(convert.Safetensors)); err != nil {
		t.Fatal(err)
	}
	m, err := ckpt.Load(ctx, out)
	if err != nil {
		t.Fatalf("clean file: %v", err)
	}
	m.Close()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytesReaderAt(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var at int64 = -1
	if ti, ok := h.Lookup("encoder.bias"); ok {
		at = h.DataOffset + ti.Begin
	}
	if at < 0 {
		t.Fatal("encoder.bias not found")
	}
	data[at] ^= 0x40
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err = ckpt.Load(ctx, out)
	var ve *devicecopy.VerifyError
	if !errors.As(err, &ve) || len(ve.Mismatches) != 1 || ve.Mismatches[0].Tensors[0] != "encoder.bias" ||
		ve.Mismatches[0].Kind != devicecopy.MismatchSaved {
		t.Fatalf("flipped byte: %v", err)
	}
	if m == nil || m.Host == nil {
		t.Fatal("no model to report from with a verification error")
	}
	m.Close()
}

func bytesReaderAt(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func unsafePointer(p *float32) unsafe.Pointer { return unsafe.Pointer(p) }

// WithRank loads only one rank's part: rows 2:3 of encoder.weight [3, 4]
// for rank 1 of 2 (torch.chunk: 2 rows, then 1), the same bytes as the
// whole tensor's last row; unmatched tensors load whole.
func TestLoadRank(t *testing.T) {
	ctx := context.Background()
	rules, err := statedict.ParseSplitRules("encoder.weight=0")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := ckpt.Load(ctx, fixtures+"zip_basic.pt", ckpt.WithMapLocation("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer whole.Close()
	part, err := ckpt.Load(ctx, fixtures+"zip_basic.pt", ckpt.WithMapLocation("cpu"), ckpt.WithRank(1, 2, rules))
	if err != nil {
		t.Fatal(err)
	}
	defer part.Close()
	w, _ := whole.Tensor("encoder.weight")
	p, _ := part.Tensor("encoder.weight")
	wb, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	pb, err := p.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Shape) != 2 || p.Shape[0] != 1 || p.Shape[1] != 4 || !bytes.Equal(pb, wb[2*16:]) {
		t.Errorf("rank 1 of encoder.weight: shape %v bytes %x, want [1 4] %x", p.Shape, pb, wb[32:])
	}
	wbias, _ := whole.Tensor("encoder.bias")
	pbias, _ := part.Tensor("encoder.bias")
	a, _ := wbias.Bytes()
	b, _ := pbias.Bytes()
	if !bytes.Equal(a, b) {
		t.Error("an unmatched tensor is not loaded whole")
	}
	if _, err := ckpt.Load(ctx, fixtures+"zip_basic.pt", ckpt.WithRank(2, 2, rules)); !errors.Is(err, statedict.ErrSlice) {
		t.Errorf("rank 2 of 2: %v", err)
	}
}

// A float4_e2m1fn_x2 tensor (safetensors F4: two fp4 values per byte, the
// last dimension counted in fp4 values) is viewed as its raw bytes.
func TestViewFloat4(t *testing.T) {
	hdr := []byte(`{"w":{"dtype":"F4","shape":[2,4],"data_offsets":[0,4]}}`)
	var b bytes.Buffer
	b.Write([]byte{byte(len(hdr)), 0, 0, 0, 0, 0, 0, 0})
	b.Write(hdr)
	b.Write([]byte{0x12, 0x34, 0x56, 0x78})
	path := filepath.Join(t.TempDir(), "f4.safetensors")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := ckpt.Load(context.Background(), path, ckpt.WithMapLocation("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w, ok := m.Tensor("w")
	if !ok || w.DType != dtype.Float4E2M1FNx2 {
		t.Fatalf("tensor w: %v %+v", ok, w)
	}
	v, err := ckpt.View[uint8](w)
	if err != nil || !bytes.Equal(v, []byte{0x12, 0x34, 0x56, 0x78}) {
		t.Fatalf("View[uint8]: %v %x", err, v)
	}
	if _, err := ckpt.View[uint16](w); !errors.Is(err, ckpt.ErrDType) {
		t.Errorf("View[uint16]: %v, want ErrDType", err)
	}
}

// TestLoadInvalidSparse: ckpt.Load refuses a checkpoint with a sparse tensor
// whose invariants do not hold, as torch.load does, instead of handing out
// indices a consumer would densify out of bounds; leaving that tensor out
// with WithFilter loads the rest.
func TestLoadInvalidSparse(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"sparse_invalid_coo.pt", "sparse_invalid_csr_col.pt", "torch2_sparse_invalid_csc.pt"} {
		_, err := ckpt.Load(ctx, fixtures+"bad/"+name, ckpt.WithMapLocation("cpu"))
		if !errors.Is(err, statedict.ErrInvalidSparse) {
			t.Errorf("%s: Load error %v, want ErrInvalidSparse", name, err)
		}
		m, err := ckpt.Load(ctx, fixtures+"bad/"+name, ckpt.WithMapLocation("cpu"),
			ckpt.WithFilter(func(n string) bool { return n == "dense" }))
		if err != nil {
			t.Fatalf("%s: Load of the dense tensor only: %v", name, err)
		}
		d, ok := m.Tensor("dense")
		if !ok {
			t.Fatalf("%s: no dense tensor", name)
		}
		if v, err := ckpt.View[float32](d); err != nil || len(v) != 2 || v[0] != 1 {
			t.Errorf("%s: View(dense) = %v, %v", name, v, err)
		}
		m.Close()
	}
}

// TestLoadOldTensorClass: tensors reduced through torch.Tensor itself
// (pre-0.4 files), zip and legacy, load with the values torch.load gives
// (testdata/fixtures/old_tensor_class*.expected.json: w = arange(12)/4).
func TestLoadOldTensorClass(t *testing.T) {
	for _, f := range []string{"old_tensor_class.pt", "old_tensor_class_legacy.pt"} {
		m, err := ckpt.Load(context.Background(), fixtures+f, ckpt.WithMapLocation("cpu"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w, _ := m.Tensor("w")
		cols, _ := m.Tensor("w.cols")
		v, err := ckpt.View[float32](w)
		if err != nil || len(v) != 12 || v[11] != 2.75 {
			t.Errorf("%s: w = %v, %v", f, v, err)
		}
		b, err := cols.Bytes() // rows of [1, 3], [5, 7], [9, 11] quarters
		if err != nil || len(b) != 24 || cols.Source.RequiresGrad {
			t.Errorf("%s: w.cols = %v, %v", f, b, err)
		}
		if vr, _ := m.Tensor("var"); vr == nil || !vr.Source.RequiresGrad {
			t.Errorf("%s: var does not require grad", f)
		}
		m.Close()
	}
}

// TestLoadRealWorldFixtures: the DTensor, jagged nested and whole quantized
// model fixtures load, every tensor ckpt lists on the host with its bytes
// (a DTensor as its local shard).
func TestLoadRealWorldFixtures(t *testing.T) {
	for f, want := range map[string]map[string]int64{
		"torch2_fsdp2_w2_rank1.pt": {"0.weight": 48, "0.bias": 12, "2.weight": 24, "2.bias": 4},
		"torch2_nested_jagged.pt":  {"jagged.values": 60, "jagged.offsets": 24, "with_lengths.lengths": 16},
		"quant_dynamic_model.pt":   {"0._packed_params._packed_params.0": 12, "2._packed_params._packed_params.1": 8},
		"quant_static_model.pt":    {"conv1.weight": 54, "conv1.bias": 12},
	} {
		m, err := ckpt.Load(context.Background(), fixtures+f, ckpt.WithMapLocation("cpu"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for name, n := range want {
			tt, ok := m.Tensor(name)
			if !ok {
				t.Errorf("%s: no tensor %s", f, name)
				continue
			}
			if b, err := tt.Bytes(); err != nil || int64(len(b)) != n {
				t.Errorf("%s: %s: %d bytes, %v; want %d", f, name, len(b), err, n)
			}
		}
		m.Close()
	}
}
