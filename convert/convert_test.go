package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

const fixtures = "../testdata/fixtures/"

func open(t *testing.T, path string) *statedict.Checkpoint {
	t.Helper()
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

func convert(t *testing.T, in, out string, opts ...Option) *Summary {
	t.Helper()
	sum, err := Convert(context.Background(), open(t, in), out, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// noDiff fails when Compare finds any difference between a and b.
func noDiff(t *testing.T, a, b string, opts verify.CompareOptions) {
	t.Helper()
	rep, err := verify.Compare(context.Background(), open(t, a), open(t, b), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Differences) > 0 || rep.Compared == 0 {
		t.Errorf("%s vs %s: %d compared, differences %+v", a, b, rep.Compared, rep.Differences)
	}
}

// dirFiles lists the names in dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestSafetensorsTied(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "t.safetensors")
	sum := convert(t, fixtures+"tied.pt", out)
	if sum.Aliases["lm_head.weight"] != "embed.weight" || len(sum.Aliases) != 1 {
		t.Errorf("aliases %v", sum.Aliases)
	}
	f, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytes.NewReader(f), int64(len(f)))
	if err != nil {
		t.Fatal(err)
	}
	if h.HeaderSize%8 != 0 || h.Metadata["format"] != "pt" || h.Metadata["lm_head.weight"] != "embed.weight" {
		t.Errorf("header size %d, metadata %v", h.HeaderSize, h.Metadata)
	}
	if _, ok := h.Lookup("lm_head.weight"); ok {
		t.Error("alias stored twice")
	}
	digests, err := digest.ParseMetadata(h.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	src := open(t, fixtures+"tied.pt")
	for _, ti := range h.Tensors {
		data := f[h.DataOffset+ti.Begin : h.DataOffset+ti.End]
		if digests[ti.Name] != digest.SumBytes(data) {
			t.Errorf("%s: digest %s, data %s", ti.Name, digests[ti.Name], digest.SumBytes(data))
		}
		want, err := src.Tensor(ti.Name).ReadAll() // views: the logical elements
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, want) {
			t.Errorf("%s: data differs from the source's logical elements", ti.Name)
		}
	}
	if len(digests) != len(h.Tensors) {
		t.Errorf("%d digests for %d tensors", len(digests), len(h.Tensors))
	}
	noDiff(t, fixtures+"tied.pt", out, verify.CompareOptions{})

	// Check passes, then finds a flipped byte by tensor name.
	rep, err := verify.Check(context.Background(), open(t, out))
	if err != nil || len(rep.Mismatches) != 0 || rep.Digests != len(h.Tensors) {
		t.Fatalf("check %+v %v", rep, err)
	}
	ti, _ := h.Lookup("embed.weight")
	f[h.DataOffset+ti.Begin+5] ^= 1
	bad := filepath.Join(dir, "bad.safetensors")
	if err := os.WriteFile(bad, f, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = verify.Check(context.Background(), open(t, bad))
	if err != nil || len(rep.Mismatches) != 1 || rep.Mismatches[0].Name != "embed.weight" || rep.Mismatches[0].Kind != "digest" {
		t.Errorf("corrupt check %+v %v", rep, err)
	}
}

func TestPthRoundTripKeepsTies(t *testing.T) {
	dir := t.TempDir()
	st, pt := filepath.Join(dir, "t.safetensors"), filepath.Join(dir, "t.pt")
	convert(t, fixtures+"tied.pt", st)
	convert(t, st, pt)
	noDiff(t, fixtures+"tied.pt", pt, verify.CompareOptions{})
	ck := open(t, pt)
	if ck.Tensor("embed.weight").Storage != ck.Tensor("lm_head.weight").Storage {
		t.Error("tied weights not tied after safetensors -> pth")
	}
	// pth -> pth keeps every view on its storage.
	direct := filepath.Join(dir, "d.pt")
	convert(t, fixtures+"tied.pt", direct)
	noDiff(t, fixtures+"tied.pt", direct, verify.CompareOptions{})
	src, got := open(t, fixtures+"tied.pt"), open(t, direct)
	if len(got.Storages) != len(src.Storages) {
		t.Errorf("%d storages, source has %d", len(got.Storages), len(src.Storages))
	}
	rep, err := verify.Check(context.Background(), got)
	if err != nil || rep.CRC32s != len(got.Storages) || len(rep.Mismatches) > 0 {
		t.Errorf("check %+v %v", rep, err)
	}
}

func TestInputsConvert(t *testing.T) {
	for _, in := range []string{"training.pt", "legacy.pt", "tar.pt", "zip_bigendian.pt", "zip_deflated.pt", "zip_basic.pt.gz", "params.pt", "sharded_st", "sharded_bin", "model.safetensors", "zip64.pt"} {
		t.Run(in, func(t *testing.T) {
			dir := t.TempDir()
			for _, out := range []string{"o.safetensors", "o.pt"} {
				convert(t, fixtures+in, filepath.Join(dir, out))
				noDiff(t, fixtures+in, filepath.Join(dir, out), verify.CompareOptions{})
			}
		})
	}
}

func TestRetag(t *testing.T) {
	dir := t.TempDir()
	keep, cpu := filepath.Join(dir, "keep.pt"), filepath.Join(dir, "cpu.pt")
	convert(t, fixtures+"cuda_tagged.pt", keep)
	rules, err := remap.Parse("cpu")
	if err != nil {
		t.Fatal(err)
	}
	convert(t, fixtures+"cuda_tagged.pt", cpu, WithRules(rules))
	src := open(t, fixtures+"cuda_tagged.pt")
	k, c := open(t, keep), open(t, cpu)
	for i, t0 := range src.Tensors {
		if k.Tensors[i].Device != t0.Device {
			t.Errorf("%s: kept tag %s, saved %s", t0.Name, k.Tensors[i].Device, t0.Device)
		}
		if c.Tensors[i].Device != "cpu" {
			t.Errorf("%s: tag %s after --map-location cpu", t0.Name, c.Tensors[i].Device)
		}
	}
	noDiff(t, fixtures+"cuda_tagged.pt", cpu, verify.CompareOptions{})
}

func TestCollisionBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.safetensors")
	re, err := ParseRename(`^(embed|lm_head)\.=x.`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Convert(context.Background(), open(t, fixtures+"tied.pt"), out, WithRename(re))
	var te *TensorError
	if !errors.Is(err, ErrCollision) || !errors.As(err, &te) || te.Name != "x.weight" {
		t.Errorf("err %v", err)
	}
	if files := dirFiles(t, dir); len(files) != 0 {
		t.Errorf("wrote %v", files)
	}
}

func TestStripRenameOnly(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.safetensors")
	re, _ := ParseRename(`weight$=w`)
	sum := convert(t, fixtures+"training.pt", out, WithOnly("model.*"), WithStripPrefix("model."), WithRename(re))
	ck := open(t, out)
	src := open(t, fixtures+"training.pt")
	var want int
	for _, t0 := range src.Tensors {
		if !strings.HasPrefix(t0.Name, "model.") {
			continue
		}
		want++
		name := strings.TrimSuffix(strings.TrimPrefix(t0.Name, "model."), "weight")
		if strings.HasSuffix(t0.Name, "weight") {
			name += "w"
		}
		if ck.Tensor(name) == nil {
			t.Errorf("%s not renamed to %s", t0.Name, name)
		}
	}
	if len(ck.Tensors)+len(sum.Aliases) != want || sum.Renamed == 0 {
		t.Errorf("%d tensors + %d aliases, want %d", len(ck.Tensors), len(sum.Aliases), want)
	}
}

func TestExistingOutput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.safetensors")
	if err := os.WriteFile(out, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Convert(context.Background(), open(t, fixtures+"tied.pt"), out)
	if !errors.Is(err, ErrExists) {
		t.Fatalf("err %v", err)
	}
	if b, _ := os.ReadFile(out); string(b) != "precious" {
		t.Error("existing output replaced without force")
	}
	convert(t, fixtures+"tied.pt", out, WithForce(true))
	noDiff(t, fixtures+"tied.pt", out, verify.CompareOptions{})
}

// fullDisk fails with ENOSPC once n bytes were written, as a full disk does.
type fullDisk struct {
	w io.Writer
	n int64
}

func (f *fullDisk) Write(p []byte) (int, error) {
	if int64(len(p)) > f.n {
		m, _ := f.w.Write(p[:f.n])
		f.n = 0
		return m, &os.PathError{Op: "write", Path: "out", Err: syscall.ENOSPC}
	}
	f.n -= int64(len(p))
	return f.w.Write(p)
}

func TestDiskFull(t *testing.T) {
	for _, out := range []string{"o.safetensors", "o.pt", "o.safetensors.zst", "shards/model.safetensors.index.json"} {
		t.Run(out, func(t *testing.T) {
			dir := t.TempDir()
			if strings.Contains(out, "shards") {
				dir = filepath.Join(dir, "shards")
				os.Mkdir(dir, 0o755)
				out = filepath.Base(out)
			}
			opts := []Option{WithBufferSize(4096), WithOutputWrapper(func(w io.Writer) io.Writer { return &fullDisk{w: w, n: 300} })}
			if strings.HasSuffix(out, ".zst") {
				opts = append(opts, WithCompress("zstd"))
			}
			if strings.Contains(out, "index") {
				opts = append(opts, WithMaxShardSize(100))
			}
			_, err := Convert(context.Background(), open(t, fixtures+"training.pt"), filepath.Join(dir, out), opts...)
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "no space left on device") {
				t.Errorf("err %v", err)
			}
			if files := dirFiles(t, filepath.Dir(filepath.Join(dir, out))); len(files) != 0 {
				t.Errorf("left %v", files)
			}
		})
	}
}

// TestOutputDirectory: a directory or index output creates its missing
// directories, and removes them again when the conversion fails; a single
// file in a missing directory is an error that creates nothing.
func TestOutputDirectory(t *testing.T) {
	dir := t.TempDir()
	convert(t, fixtures+"training.pt", filepath.Join(dir, "a", "b")+"/")
	if files := dirFiles(t, filepath.Join(dir, "a", "b")); len(files) != 1 || files[0] != "model.safetensors" {
		t.Errorf("directory output: %v", files)
	}
	convert(t, fixtures+"training.pt", filepath.Join(dir, "c", "model.safetensors.index.json"), WithMaxShardSize(100))
	if files := dirFiles(t, filepath.Join(dir, "c")); len(files) < 3 {
		t.Errorf("index output: %v", files)
	}

	full := WithOutputWrapper(func(w io.Writer) io.Writer { return &fullDisk{w: w, n: 300} })
	_, err := Convert(context.Background(), open(t, fixtures+"training.pt"), filepath.Join(dir, "d", "e", "model.safetensors.index.json"), WithMaxShardSize(100), full)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("err %v", err)
	}
	_, err = Convert(context.Background(), open(t, fixtures+"training.pt"), filepath.Join(dir, "f", "o.safetensors"))
	if err == nil || !strings.Contains(err.Error(), "output directory "+filepath.Join(dir, "f")+" does not exist") {
		t.Errorf("single file in a missing directory: %v", err)
	}
	if files := dirFiles(t, dir); strings.Join(files, ",") != "a,c" {
		t.Errorf("left %v, want a,c", files)
	}
}

func TestCancelLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Convert(ctx, open(t, fixtures+"training.pt"), filepath.Join(dir, "o.pt"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v", err)
	}
	if files := dirFiles(t, dir); len(files) != 0 {
		t.Errorf("left %v", files)
	}
}

func TestShards(t *testing.T) {
	for _, ext := range []string{".safetensors", ".bin"} {
		dir := t.TempDir()
		sum := convert(t, fixtures+"training.pt", dir, WithMaxShardSize(200), WithFormat(formatOf(ext)))
		if len(sum.Files) < 2 || sum.Index == "" {
			t.Fatalf("%s: files %v index %q", ext, sum.Files, sum.Index)
		}
		stem := map[string]string{".safetensors": "model", ".bin": "pytorch_model"}[ext]
		if filepath.Base(sum.Files[0]) != stem+"-00001-of-"+strings.Repeat("0", 4)+string(rune('0'+len(sum.Files)))+ext ||
			filepath.Base(sum.Index) != stem+ext+".index.json" {
			t.Errorf("names %v %s", sum.Files, sum.Index)
		}
		var idx struct {
			Metadata struct {
				TotalSize int64 `json:"total_size"`
			}
			WeightMap map[string]string `json:"weight_map"`
		}
		b, _ := os.ReadFile(sum.Index)
		if err := json.Unmarshal(b, &idx); err != nil || idx.Metadata.TotalSize != sum.Bytes || len(idx.WeightMap) != sum.Tensors {
			t.Errorf("index %s: %v", b, err)
		}
		noDiff(t, fixtures+"training.pt", sum.Index, verify.CompareOptions{})
	}
}

func formatOf(ext string) Format {
	f, _ := formatFor("x" + ext)
	return f
}

func TestZstd(t *testing.T) {
	dir := t.TempDir()
	for _, out := range []string{"o.safetensors.zst", "o.pt.zst"} {
		p := filepath.Join(dir, out)
		convert(t, fixtures+"training.pt", p, WithCompress("zstd"))
		ck := open(t, p)
		if ck.Compression != "zstd" {
			t.Errorf("%s: compression %q", out, ck.Compression)
		}
		noDiff(t, fixtures+"training.pt", p, verify.CompareOptions{})
	}
	if files := dirFiles(t, dir); len(files) != 2 {
		t.Errorf("files %v", files)
	}
}

func TestCast(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.pt")
	sum := convert(t, fixtures+"training.pt", out, WithDType(dtype.BFloat16))
	src, got := open(t, fixtures+"training.pt"), open(t, out)
	var casts int
	for _, s := range src.Tensors {
		g := got.Tensor(s.Name)
		want := s.DType
		if s.DType == dtype.Float32 && !isStepCounter(s) {
			want = dtype.BFloat16
		}
		if g.DType != want {
			t.Errorf("%s: %s -> %s, want %s", s.Name, s.DType, g.DType, want)
			continue
		}
		if want != s.DType {
			casts++
			a, _ := s.ReadAll()
			b, _ := g.ReadAll()
			for i := range len(b) / 2 {
				f := math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
				if binary.LittleEndian.Uint16(b[2*i:]) != dtype.F32ToBF16(f) {
					t.Fatalf("%s[%d]: %v cast wrong", s.Name, i, f)
				}
			}
		}
	}
	if casts == 0 || sum.Casts != casts {
		t.Errorf("casts %d, summary %d", casts, sum.Casts)
	}
	rep, err := verify.Compare(context.Background(), src, got, verify.CompareOptions{Tolerance: true, Rtol: 1.0 / 128})
	if err != nil || len(rep.Differences) > 0 {
		t.Errorf("compare within bf16 precision: %+v %v", rep, err)
	}
	rep, err = verify.Compare(context.Background(), src, got, verify.CompareOptions{})
	if err != nil || len(rep.Differences) == 0 || rep.Differences[0].Kind != "dtype" {
		t.Errorf("bitwise compare should report dtypes: %+v %v", rep, err)
	}
}

func TestFloat16Rounding(t *testing.T) {
	sub := math.Ldexp(1, -24) // smallest half subnormal
	for _, c := range []struct {
		f    float64
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00},
		{1 + math.Ldexp(1, -11), 0x3c00}, {1 + 3*math.Ldexp(1, -11), 0x3c02}, {1 + math.Ldexp(1, -11) + math.Ldexp(1, -20), 0x3c01},
		{sub, 0x0001}, {sub / 2, 0}, {sub * 0.75, 0x0001}, {sub * 1.5, 0x0002}, {sub * 2.5, 0x0002},
		{math.Ldexp(1, -14), 0x0400}, {math.Ldexp(1, -14) - sub/2, 0x0400}, {1e-30, 0},
		{math.Copysign(0, -1), 0x8000}, {math.Inf(-1), 0xfc00}, {math.NaN(), 0x7e00},
	} {
		if got := dtype.F32ToF16(float32(c.f)); got != c.want {
			t.Errorf("f16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float64
		want uint16
	}{
		{1, 0x3f80}, {1 + math.Ldexp(1, -8), 0x3f80}, {1 + 3*math.Ldexp(1, -8), 0x3f82}, {math.MaxFloat32, 0x7f80},
		{math.Inf(-1), 0xff80}, {math.NaN(), 0x7fc0}, {-math.Ldexp(1, -130), 0x8008},
	} {
		if got := dtype.F32ToBF16(float32(c.f)); got != c.want {
			t.Errorf("bf16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
	// Every half value converts back to itself.
	for h := range 1 << 16 {
		f := float32(dtype.F16ToF32(uint16(h)))
		if f != f {
			continue
		}
		if got := dtype.F32ToF16(f); got != uint16(h) {
			t.Fatalf("f16 round trip %#04x -> %g -> %#04x", h, f, got)
		}
	}
}

func TestCompareReportsDifferences(t *testing.T) {
	rep, err := verify.Compare(context.Background(), open(t, fixtures+"training.pt"), open(t, fixtures+"tied.pt"), verify.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, d := range rep.Differences {
		kinds[d.Kind]++
		if d.Name == "" || d.Detail == "" {
			t.Errorf("vague difference %+v", d)
		}
	}
	if kinds["missing_in_a"] == 0 || kinds["missing_in_b"] == 0 {
		t.Errorf("kinds %v", kinds)
	}
	half := filepath.Join(t.TempDir(), "h.safetensors")
	convert(t, fixtures+"training.pt", half, WithDType(dtype.Float16))
	rep, err = verify.Compare(context.Background(), open(t, fixtures+"training.pt"), open(t, half), verify.CompareOptions{Tolerance: true})
	if err != nil {
		t.Fatal(err)
	}
	var values int
	for _, d := range rep.Differences {
		if d.Kind == "value" {
			values++
			if !strings.Contains(d.Detail, "elements differ, first at flat index") {
				t.Errorf("detail %q", d.Detail)
			}
		}
	}
	if values == 0 {
		t.Errorf("float16 values equal float32 ones exactly? %+v", rep.Differences)
	}
	// Differences come in A's order, whichever goroutine found them.
	pos := map[string]int{}
	for i, tt := range open(t, fixtures+"training.pt").Tensors {
		pos[tt.Name] = i
	}
	for i := 1; i < len(rep.Differences); i++ {
		if pos[rep.Differences[i-1].Name] > pos[rep.Differences[i].Name] {
			t.Errorf("differences out of A's order: %s before %s", rep.Differences[i-1].Name, rep.Differences[i].Name)
		}
	}
}

func TestValuesKept(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "o.safetensors")
	sum := convert(t, fixtures+"training.pt", st)
	h := open(t, st).Metadata
	var objs map[string]any
	if err := json.Unmarshal([]byte(h[ObjectsKey]), &objs); err != nil || len(objs) != len(sum.Values) || len(objs) == 0 {
		t.Fatalf("objects %s: %v", h[ObjectsKey], err)
	}
	pt := filepath.Join(dir, "o.pt")
	sum2 := convert(t, st, pt)
	for _, d := range sum2.Dropped {
		if !strings.HasPrefix(d.Reason, "float") {
			t.Errorf("dropped %+v", d)
		}
	}
	if len(open(t, pt).Objects)+len(sum2.Dropped) != len(objs) {
		t.Errorf("values lost: %d kept + %d dropped of %d", len(open(t, pt).Objects), len(sum2.Dropped), len(objs))
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"5GB": 5e9, "500mb": 5e8, "1.5GB": 15e8, "10": 10, "2KiB": 2048, "1 GB": 1e9, "100B": 100} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GB", "-1GB", "0", "1XB", "NaN", "1e30GB", "0.1"} {
		if _, err := ParseSize(in); !errors.Is(err, ErrOption) {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

// TestNewDTypeNotes: .pth output keeps float8 and uint16-64 tensors (as
// torch 2.x writes them) and lists their dtypes; safetensors output lists
// the dtype codes older readers refuse; neither drops anything.
func TestNewDTypeNotes(t *testing.T) {
	dir := t.TempDir()
	src := fixtures + "torch2_dtypes.pt"
	pt := convert(t, src, filepath.Join(dir, "o.pt"))
	if got := strings.Join(pt.Torch2DTypes, ","); got != "float8_e5m2,float8_e4m3fn,float8_e5m2fnuz,float8_e4m3fnuz,uint16,uint32,uint64" || len(pt.RecentCodes) != 0 || len(pt.Dropped) != 0 {
		t.Errorf(".pt: torch2 %v, recent %v, dropped %v", pt.Torch2DTypes, pt.RecentCodes, pt.Dropped)
	}
	noDiff(t, src, filepath.Join(dir, "o.pt"), verify.CompareOptions{})
	st := convert(t, src, filepath.Join(dir, "o.safetensors"))
	if got := strings.Join(st.RecentCodes, ","); got != "F8_E5M2FNUZ,F8_E4M3FNUZ,C64" || len(st.Torch2DTypes) != 0 || len(st.Dropped) != 0 {
		t.Errorf(".safetensors: recent %v, torch2 %v, dropped %v", st.RecentCodes, st.Torch2DTypes, st.Dropped)
	}
	classic := convert(t, fixtures+"training.pt", filepath.Join(dir, "c.safetensors"))
	if len(classic.RecentCodes) != 0 {
		t.Errorf("float32 output listed %v", classic.RecentCodes)
	}
}

// TestFloat4AndE8M0Safetensors: float4_e2m1fn_x2 and float8_e8m0fnu map to
// safetensors F4 and F8_E8M0 both ways. A torch float4_e2m1fn_x2 element
// is one byte of two fp4 values and safetensors' F4 counts the values, so
// torch [3] is F4 [6] (the reference's torch bindings double the last
// dimension on save and halve it on load); the bytes are kept as they are.
func TestFloat4AndE8M0Safetensors(t *testing.T) {
	dir := t.TempDir()
	src := fixtures + "dtypes_untyped.pt"
	st := filepath.Join(dir, "o.safetensors")
	sum := convert(t, src, st)
	for _, d := range sum.Dropped {
		if d.Name == "float4_e2m1fn_x2" || d.Name == "float8_e8m0fnu" {
			t.Errorf("dropped %s: %s", d.Name, d.Reason)
		}
	}
	f, err := os.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	hdr, err := safetensors.Parse(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ti := range hdr.Tensors {
		got[ti.Name] = fmt.Sprintf("%s %v %d", ti.DType, ti.Shape, ti.End-ti.Begin)
	}
	if got["float4_e2m1fn_x2"] != "F4 [6] 3" || got["float8_e8m0fnu"] != "F8_E8M0 [6] 6" {
		t.Errorf("safetensors header: %v", got)
	}
	back := open(t, st)
	for _, name := range []string{"float4_e2m1fn_x2", "float8_e8m0fnu"} {
		tn := back.Tensor(name)
		if tn == nil {
			t.Fatalf("%s not read back", name)
		}
		if want := map[string]string{"float4_e2m1fn_x2": "float4_e2m1fn_x2 [3]", "float8_e8m0fnu": "float8_e8m0fnu [6]"}[name]; fmt.Sprint(tn.DType, " ", tn.Shape) != want {
			t.Errorf("read back %s as %s %v, want %s", name, tn.DType, tn.Shape, want)
		}
	}
	sameFP4(t, src, st)
	// And back to .pth: torch's shape again, same bytes.
	pt := filepath.Join(dir, "o.pt")
	convert(t, st, pt)
	if tn := open(t, pt).Tensor("float4_e2m1fn_x2"); tn == nil || tn.DType != dtype.Float4E2M1FNx2 || fmt.Sprint(tn.Shape) != "[3]" {
		t.Errorf(".pt from safetensors: %+v", tn)
	}
	sameFP4(t, src, pt)
}

// sameFP4 fails when Compare finds the float4/e8m0 tensors of a and b differ
// (complex32, which safetensors cannot hold, may be missing).
func sameFP4(t *testing.T, a, b string) {
	t.Helper()
	rep, err := verify.Compare(context.Background(), open(t, a), open(t, b), verify.CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Differences {
		if d.Name != "complex32" {
			t.Errorf("%s vs %s: %+v", a, b, d)
		}
	}
	if rep.Compared < 2 {
		t.Errorf("%s vs %s: %d compared", a, b, rep.Compared)
	}
}

// TestFloat4ZeroDim: a 0-dim float4_e2m1fn_x2 tensor (one byte, two values)
// has no F4 shape; safetensors output drops it with the reason.
func TestFloat4ZeroDim(t *testing.T) {
	s := &statedict.Storage{Key: "0", DType: dtype.Float4E2M1FNx2, NBytes: 1}
	tn := &statedict.Tensor{Name: "q", DType: dtype.Float4E2M1FNx2, Storage: s}
	if why := unsupported(tn, Safetensors); !strings.Contains(why, "0-dim") {
		t.Errorf("safetensors: %q", why)
	}
	tn.Shape, tn.Strides = []int64{1}, []int64{1}
	if why := unsupported(tn, Safetensors); why != "" {
		t.Errorf("[1]: %q", why)
	}
}
