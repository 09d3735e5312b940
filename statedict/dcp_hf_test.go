package statedict

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/safetensors"
)

// The layout these tests build is torch >= 2.8's safetensors DCP as its
// writer lays it out (docs/dcp-write.md, "Safetensors DCP"): per rank a
// file shard-RRRRR-model-00001-of-00001.safetensors (RRRRR = rank+1),
// one tensor per name, __metadata__ holding DCP_SHARDING_INFO (JSON:
// name -> {"saved_offsets": [...]}), DCP_VERSION "1.0" and format "pt".

// hfChunk is one chunk to write: the box at off of size in tensor name.
type hfChunk struct {
	name      string
	off, size []int64
}

// fullF32 is a float32 tensor of shape whose element i is i+base.
func fullF32(shape []int64, base float32) []float32 {
	n := int64(1)
	for _, s := range shape {
		n *= s
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i) + base
	}
	return v
}

// cut returns the bytes of the box at off of size in a float32 tensor.
func cut(full []float32, shape, off, size []int64) []byte {
	hi := make([]int64, len(off))
	for d := range off {
		hi[d] = off[d] + size[d]
	}
	return boxOf(f32Bytes(full), shape, off, hi, 4)
}

// named returns the tensor called name.
func named(ck *Checkpoint, name string) *Tensor {
	for _, t := range ck.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

func f32Bytes(v []float32) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

// hfFile returns a safetensors file holding chunks of the tensors in
// fulls (by name, with their global shapes), with the DCP metadata
// (info, when non-nil, replaces the computed DCP_SHARDING_INFO).
func hfFile(t testing.TB, chunks []hfChunk, fulls map[string][]float32, shapes map[string][]int64, info *string) []byte {
	t.Helper()
	var decl []safetensors.WriterTensor
	data := map[string][]byte{}
	offs := map[string]map[string][]int64{}
	for _, c := range chunks {
		decl = append(decl, safetensors.WriterTensor{Name: c.name, DType: "F32", Shape: c.size})
		data[c.name] = cut(fulls[c.name], shapes[c.name], c.off, c.size)
		offs[c.name] = map[string][]int64{"saved_offsets": c.off}
	}
	js, _ := json.Marshal(offs)
	s := string(js)
	if info != nil {
		s = *info
	}
	md := map[string]string{dcp.ShardingInfoKey: s, dcp.VersionKey: "1.0", "format": "pt"}
	var out bytes.Buffer
	w, err := safetensors.NewWriter(&out, decl, md)
	if err != nil {
		t.Fatal(err)
	}
	for _, wt := range w.Order() {
		if _, err := w.WriteTensor(wt.Name, bytes.NewReader(data[wt.Name])); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// hfLayout is a 4-rank checkpoint: "col" [4,6] sharded on dimension 1 over
// ranks 0-2 (torch.chunk: 2,2,2), "mesh" [5,4] on a 2x2 mesh (uneven:
// rows 3+2), "bias" [3] whole on rank 3, "rep" [2] replicated on ranks 0
// and 1.
func hfLayout(t testing.TB) (map[string][]byte, map[string][]float32, map[string][]int64) {
	shapes := map[string][]int64{"col": {4, 6}, "mesh": {5, 4}, "bias": {3}, "rep": {2}}
	fulls := map[string][]float32{}
	for i, n := range []string{"col", "mesh", "bias", "rep"} {
		fulls[n] = fullF32(shapes[n], float32(1000*i))
	}
	ranks := [][]hfChunk{
		{{"col", []int64{0, 0}, []int64{4, 2}}, {"mesh", []int64{0, 0}, []int64{3, 2}}, {"rep", []int64{0}, []int64{2}}},
		{{"col", []int64{0, 2}, []int64{4, 2}}, {"mesh", []int64{0, 2}, []int64{3, 2}}, {"rep", []int64{0}, []int64{2}}},
		{{"col", []int64{0, 4}, []int64{4, 2}}, {"mesh", []int64{3, 0}, []int64{2, 2}}},
		{{"mesh", []int64{3, 2}, []int64{2, 2}}, {"bias", []int64{0}, []int64{3}}},
	}
	files := map[string][]byte{}
	for r, cs := range ranks {
		files[fmt.Sprintf("shard-%05d-model-00001-of-00001.safetensors", r+1)] = hfFile(t, cs, fulls, shapes, nil)
	}
	return files, fulls, shapes
}

func writeFiles(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHFDCPRead: a directory of per-rank safetensors files with
// DCP_SHARDING_INFO opens as one DCP checkpoint whose tensors have the
// global shapes (largest offset+size) and the values of the tensors the
// chunks were cut from, read whole and as slices; ranks come from the
// file names.
func TestHFDCPRead(t *testing.T) {
	dir := t.TempDir()
	files, fulls, shapes := hfLayout(t)
	writeFiles(t, dir, files)
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Format != FormatDCP || ck.ShardFormat != FormatSafetensors || len(ck.Shards) != 4 || len(ck.Warnings) != 0 {
		t.Fatalf("format %s/%s shards %v warnings %v", ck.Format, ck.ShardFormat, ck.Shards, ck.Warnings)
	}
	if len(ck.Tensors) != len(fulls) {
		t.Fatalf("%d tensors, want %d", len(ck.Tensors), len(fulls))
	}
	wantRanks := map[string][]int{"col": {0, 1, 2}, "mesh": {0, 1, 2, 3}, "bias": {3}, "rep": {0}}
	for _, tn := range ck.Tensors {
		if !slices.Equal(tn.Shape, shapes[tn.Name]) || tn.DType != dtype.Float32 {
			t.Errorf("%s: %s%v, want float32%v", tn.Name, tn.DType, tn.Shape, shapes[tn.Name])
		}
		if p := tn.Problem(); p != nil {
			t.Errorf("%s: %v", tn.Name, p)
		}
		var ranks []int
		for _, c := range tn.Chunks() {
			ranks = append(ranks, c.Rank)
		}
		sort.Ints(ranks)
		if !slices.Equal(ranks, wantRanks[tn.Name]) {
			t.Errorf("%s: chunks on ranks %v, want %v", tn.Name, ranks, wantRanks[tn.Name])
		}
		b, err := tn.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		if !bytes.Equal(b, f32Bytes(fulls[tn.Name])) {
			t.Errorf("%s: values differ from the tensor the chunks were cut from", tn.Name)
		}
	}
	mesh := named(ck, "mesh")
	s, err := mesh.Slice(Range{Start: 2, Stop: 4}, Range{Start: 1, Stop: 3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if want := cut(fulls["mesh"], shapes["mesh"], []int64{2, 1}, []int64{2, 2}); !bytes.Equal(b, want) {
		t.Errorf("slice across four chunks: got %v, want %v", b, want)
	}
}

// TestHFDCPConsolidated: the one-rank layout (model-00001-of-00001 with
// zero saved_offsets and model.safetensors.index.json) is a plain sharded
// safetensors checkpoint: the DCP metadata does not get in the way.
func TestHFDCPConsolidated(t *testing.T) {
	dir := t.TempDir()
	shapes := map[string][]int64{"w": {3, 2}, "b": {2}}
	fulls := map[string][]float32{"w": fullF32(shapes["w"], 0), "b": fullF32(shapes["b"], 50)}
	f := hfFile(t, []hfChunk{{"w", []int64{0, 0}, []int64{3, 2}}, {"b", []int64{0}, []int64{2}}}, fulls, shapes, nil)
	writeFiles(t, dir, map[string][]byte{
		"model-00001-of-00001.safetensors": f,
		"model.safetensors.index.json": []byte(`{"metadata": {"total_size": 32}, "weight_map": {"w": "model-00001-of-00001.safetensors",` +
			` "b": "model-00001-of-00001.safetensors"}}`),
	})
	ck, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Format != FormatSharded || len(ck.Tensors) != 2 {
		t.Fatalf("format %s, %d tensors", ck.Format, len(ck.Tensors))
	}
	for _, tn := range ck.Tensors {
		b, err := tn.ReadAll()
		if err != nil || !bytes.Equal(b, f32Bytes(fulls[tn.Name])) {
			t.Errorf("%s: %v", tn.Name, err)
		}
	}
	// Without the index, one file with zero offsets stays a safetensors file.
	os.Remove(filepath.Join(dir, "model.safetensors.index.json"))
	ck2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck2.Close()
	if ck2.Format != FormatSafetensors {
		t.Errorf("format %s, want safetensors", ck2.Format)
	}
}

// TestHFDCPHostile: damaged DCP metadata fails the open with a one-line
// error naming the file (and tensor), or flags the tensor (Problem) when
// the chunks do not tile it; other tensors still read.
func TestHFDCPHostile(t *testing.T) {
	shapes := map[string][]int64{"a": {4, 2}, "b": {2}}
	fulls := map[string][]float32{"a": fullF32(shapes["a"], 0), "b": fullF32(shapes["b"], 9)}
	str := func(s string) *string { return &s }
	good := []hfChunk{{"a", []int64{0, 0}, []int64{2, 2}}, {"b", []int64{0}, []int64{2}}}
	other := []hfChunk{{"a", []int64{2, 0}, []int64{2, 2}}}
	cases := []struct {
		name     string
		info     *string   // rank 0's DCP_SHARDING_INFO
		chunks   []hfChunk // rank 1's chunks
		err      error     // from Open; nil: Open works and tensor "a" has problem
		problem  error
		contains string
	}{
		{"not json", str(`{"a": `), other, ErrMalformed, nil, "DCP_SHARDING_INFO is not a JSON object"},
		{"list", str(`[1, 2]`), other, ErrMalformed, nil, "not a JSON object"},
		{"no saved_offsets", str(`{"a": {}, "b": {"saved_offsets": [0]}}`), other, ErrMalformed, nil, `"a" has no saved_offsets`},
		{"float offsets", str(`{"a": {"saved_offsets": [0.5, 0]}, "b": {"saved_offsets": [0]}}`), other, ErrMalformed, nil, "not a list"},
		{"negative", str(`{"a": {"saved_offsets": [-2, 0]}, "b": {"saved_offsets": [0]}}`), other, ErrMalformed, nil, "negative offset"},
		{"huge", str(`{"a": {"saved_offsets": [9223372036854775807, 0]}, "b": {"saved_offsets": [0]}}`), other, ErrOverflow, nil, "offset"},
		{"too many dims", str(`{"a": {"saved_offsets": [0, 0, 0]}, "b": {"saved_offsets": [0]}}`), other, ErrMalformed, nil, "for a tensor of shape"},
		{"missing entry", str(`{"a": {"saved_offsets": [0, 0]}}`), other, ErrMalformed, nil, `tensor "b"`},
		{"overlap", nil, []hfChunk{{"a", []int64{1, 0}, []int64{3, 2}}}, nil, dcp.ErrTiling, "overlap"},
		{"gap", nil, []hfChunk{{"a", []int64{3, 0}, []int64{1, 2}}}, nil, dcp.ErrTiling, "gap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			chunks1 := tc.chunks
			ext := map[string][]int64{"a": {4, 2}, "b": {2}}
			writeFiles(t, dir, map[string][]byte{
				"shard-00001-model-00001-of-00001.safetensors": hfFile(t, good, fulls, ext, tc.info),
				"shard-00002-model-00001-of-00001.safetensors": hfFile(t, chunks1, fulls, ext, nil),
			})
			ck, err := Open(dir)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(fmt.Sprint(err), tc.contains) || strings.Contains(fmt.Sprint(err), "\n") ||
					!strings.Contains(fmt.Sprint(err), "shard-00001") {
					t.Fatalf("got %v, want %v naming shard-00001 and %q", err, tc.err, tc.contains)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			a := named(ck, "a")
			if p := a.Problem(); !errors.Is(p, tc.problem) || !strings.Contains(p.Error(), tc.contains) {
				t.Errorf("problem %v, want %v (%s)", p, tc.problem, tc.contains)
			}
			if _, err := a.ReadAll(); !errors.Is(err, tc.problem) {
				t.Errorf("read: %v", err)
			}
			if b, err := named(ck, "b").ReadAll(); err != nil || !bytes.Equal(b, f32Bytes(fulls["b"])) {
				t.Errorf("b: %v", err)
			}
		})
	}
}

// memFS is an in-memory FS for fuzzing without files.
type memFS map[string][]byte

type memFile struct{ *bytes.Reader }

func (memFile) Close() error { return nil }

func (f memFile) Size() int64 { return f.Reader.Size() }

func (m memFS) OpenFile(name string) (File, error) {
	b, ok := m[name]
	if !ok {
		return nil, os.ErrNotExist
	}
	return memFile{bytes.NewReader(b)}, nil
}

func (m memFS) IsDir(name string) (bool, error) { return name == "ck", nil }

func (m memFS) ReadDir(name string) ([]string, error) {
	var out []string
	for n := range m {
		if path.Dir(n) == name {
			out = append(out, path.Base(n))
		}
	}
	sort.Strings(out)
	return out, nil
}

// FuzzHFDCPShardingInfo feeds mutations of rank 0's DCP_SHARDING_INFO (in
// a four-rank checkpoint held in memory) to the safetensors DCP reader:
// opening and reading must return, not panic or hang; opening allocates
// at most 16 MiB plus 512 bytes per byte of the JSON, whatever the
// offsets claim (nothing is sized by them); a tensor that
// reads has the size its shape says and no Problem. Tensors above 1 MiB
// are not read: a chunk far out makes a shape that large.
func FuzzHFDCPShardingInfo(f *testing.F) {
	files, _, _ := hfLayout(f)
	f.Add(`{"col": {"saved_offsets": [0, 0]}, "mesh": {"saved_offsets": [0, 0]}, "rep": {"saved_offsets": [0]}}`)
	f.Add(`{"col": {"saved_offsets": [0, 1]}, "mesh": {"saved_offsets": [1, 0]}, "rep": {"saved_offsets": [5]}}`)
	f.Add(`{"col": {"saved_offsets": [0, 4611686018427387904]}, "mesh": {"saved_offsets": [0, 0]}, "rep": {"saved_offsets": [0]}}`)
	f.Add(`{"col": {"saved_offsets": []}}`)
	f.Add(`[]`)
	fulls := map[string][]float32{"col": fullF32([]int64{4, 6}, 0), "mesh": fullF32([]int64{5, 4}, 0), "rep": fullF32([]int64{2}, 0)}
	shapes := map[string][]int64{"col": {4, 6}, "mesh": {5, 4}, "rep": {2}}
	rank0 := []hfChunk{{"col", []int64{0, 0}, []int64{4, 2}}, {"mesh", []int64{0, 0}, []int64{3, 2}}, {"rep", []int64{0}, []int64{2}}}
	f.Fuzz(func(t *testing.T, info string) {
		if !utf8.ValidString(info) {
			return // safetensors metadata is UTF-8: the writer refuses it, the reader too
		}
		fs := memFS{}
		for n, b := range files {
			fs["ck/"+n] = b
		}
		fs["ck/shard-00001-model-00001-of-00001.safetensors"] = hfFile(t, rank0, fulls, shapes, &info)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ck, err := OpenFS(fs, "ck")
		runtime.ReadMemStats(&after)
		if alloc, bound := after.TotalAlloc-before.TotalAlloc, uint64(16<<20+512*len(info)); alloc > bound {
			t.Fatalf("open allocated %d bytes for %d bytes of DCP_SHARDING_INFO (bound %d); err=%v", alloc, len(info), bound, err)
		}
		if err != nil {
			return
		}
		defer ck.Close()
		for _, tn := range ck.Tensors {
			if tn.NBytes() > 1<<20 {
				continue
			}
			b, err := tn.ReadAll()
			if err == nil && int64(len(b)) != tn.NBytes() {
				t.Fatalf("%s: %d bytes, want %d", tn.Name, len(b), tn.NBytes())
			}
			if err == nil && tn.Problem() != nil {
				t.Fatalf("%s read despite problem %v", tn.Name, tn.Problem())
			}
		}
	})
}

// TestHFDCPOneFile: one rank's file opened alone is a safetensors file of
// its chunks, with a warning that the directory holds the whole tensors;
// a directory holding only that file opens as a DCP checkpoint whose
// tensors show the gap.
func TestHFDCPOneFile(t *testing.T) {
	dir := t.TempDir()
	files, _, _ := hfLayout(t)
	name := "shard-00002-model-00001-of-00001.safetensors"
	writeFiles(t, dir, map[string][]byte{name: files[name]})
	ck, err := Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Format != FormatSafetensors || len(ck.Warnings) != 1 || !strings.Contains(ck.Warnings[0], "open its directory") {
		t.Errorf("format %s, warnings %q", ck.Format, ck.Warnings)
	}
	ckd, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ckd.Close()
	if ckd.Format != FormatDCP || !errors.Is(named(ckd, "col").Problem(), dcp.ErrTiling) {
		t.Errorf("directory: format %s, col problem %v", ckd.Format, named(ckd, "col").Problem())
	}
}
