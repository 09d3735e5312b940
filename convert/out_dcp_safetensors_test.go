package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
)

// hfDCPOpts are the options of a safetensors DCP output of ranks ranks.
func hfDCPOpts(t *testing.T, ranks int, split string) []Option {
	opts := []Option{WithFormat(DCP), WithDCPSerialization(DCPSafetensors), WithDCPRanks(ranks)}
	if split != "" {
		rules, err := statedict.ParseSplitRules(split)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, WithSplit(rules))
	}
	return opts
}

// hfAssemble rebuilds global tensors from the safetensors files of dir the
// way torch's HuggingFaceStorageReader and consolidate_safetensors_files
// do, independently of package statedict: every *.safetensors file, each
// tensor placed at its DCP_SHARDING_INFO saved_offsets, the global shape
// the largest offset+size per dimension. It checks the header metadata
// the writer puts in every file.
func hfAssemble(t *testing.T, dir string) (map[string][]byte, map[string][]int64, map[string]string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(files) == 0 {
		t.Fatalf("no safetensors files in %s", dir)
	}
	type chunk struct {
		off, shape []int64
		data       []byte
		es         int64
	}
	chunks := map[string][]chunk{}
	dtypes := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sf, err := safetensors.Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if sf.Metadata["DCP_VERSION"] != "1.0" || sf.Metadata["format"] != "pt" {
			t.Errorf("%s: metadata %v lacks DCP_VERSION 1.0 or format pt", f, sf.Metadata)
		}
		var info map[string]struct {
			SavedOffsets []int64 `json:"saved_offsets"`
		}
		if err := json.Unmarshal([]byte(sf.Metadata["DCP_SHARDING_INFO"]), &info); err != nil {
			t.Fatalf("%s: DCP_SHARDING_INFO: %v", f, err)
		}
		if len(info) != len(sf.Tensors) {
			t.Errorf("%s: DCP_SHARDING_INFO lists %d tensors, the file holds %d", f, len(info), len(sf.Tensors))
		}
		for _, ti := range sf.Tensors {
			e, ok := info[ti.Name]
			if !ok || len(e.SavedOffsets) != len(ti.Shape) {
				t.Fatalf("%s: %s: saved_offsets %v for shape %v", f, ti.Name, e.SavedOffsets, ti.Shape)
			}
			es, _ := safetensors.ElementSize(ti.DType)
			chunks[ti.Name] = append(chunks[ti.Name], chunk{e.SavedOffsets, ti.Shape, b[sf.DataOffset+ti.Begin : sf.DataOffset+ti.End], int64(es)})
			dtypes[ti.Name] = ti.DType
		}
	}
	out, shapes := map[string][]byte{}, map[string][]int64{}
	for name, cs := range chunks {
		shape := slices.Clone(cs[0].shape)
		for _, c := range cs {
			for d := range shape {
				shape[d] = max(shape[d], c.off[d]+c.shape[d])
			}
		}
		n := cs[0].es
		for _, s := range shape {
			n *= s
		}
		full := make([]byte, n)
		for _, c := range cs {
			// Element by element: the chunk's C-order index -> global index.
			idx := make([]int64, len(shape))
			for i := int64(0); i*c.es < int64(len(c.data)); i++ {
				g := int64(0)
				for d := range shape {
					g = g*shape[d] + c.off[d] + idx[d]
				}
				copy(full[g*c.es:(g+1)*c.es], c.data[i*c.es:(i+1)*c.es])
				for d := len(idx) - 1; d >= 0; d-- {
					if idx[d]++; idx[d] < c.shape[d] {
						break
					}
					idx[d] = 0
				}
			}
		}
		out[name], shapes[name] = full, shape
	}
	return out, shapes, dtypes
}

// checkAssembled compares hfAssemble's tensors with the input's.
func checkAssembled(t *testing.T, in, dir string) {
	t.Helper()
	got, shapes, _ := hfAssemble(t, dir)
	ck := open(t, in)
	n := 0
	for _, tn := range ck.Tensors {
		if unsupported(tn, Safetensors) != "" {
			continue
		}
		n++
		want, err := tn.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(shapes[tn.Name], tn.Shape) || !bytes.Equal(got[tn.Name], want) {
			t.Errorf("%s: assembled %v %d bytes, want %v %d bytes (equal: %v)", tn.Name, shapes[tn.Name], len(got[tn.Name]), tn.Shape, len(want), bytes.Equal(got[tn.Name], want))
		}
	}
	if len(got) != n {
		t.Errorf("%d tensors assembled, the input has %d", len(got), n)
	}
}

// TestDCPSafetensorsOneRank: one rank writes model-00001-of-00001.safetensors
// with zero saved_offsets and model.safetensors.index.json whose
// weight_map names that file for every tensor and whose total_size is the
// tensor bytes, as HuggingFaceStorageWriter saves a rank-0 state dict;
// the files reassemble (by upstream's rule) to the input, and ckpt reads
// the output back equal.
func TestDCPSafetensorsOneRank(t *testing.T) {
	for _, in := range dcpInputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "hf")
			sum := convert(t, in, out, hfDCPOpts(t, 1, "")...)
			file := filepath.Join(out, "model-00001-of-00001.safetensors")
			index := filepath.Join(out, "model.safetensors.index.json")
			if !slices.Equal(sum.Files, []string{file}) || sum.Index != index {
				t.Fatalf("files %v index %q", sum.Files, sum.Index)
			}
			var idx struct {
				Metadata  map[string]int64  `json:"metadata"`
				WeightMap map[string]string `json:"weight_map"`
			}
			b, err := os.ReadFile(index)
			if err != nil || json.Unmarshal(b, &idx) != nil {
				t.Fatalf("index: %v %s", err, b)
			}
			got, _, _ := hfAssemble(t, out)
			var total int64
			for name, data := range got {
				total += int64(len(data))
				if idx.WeightMap[name] != "model-00001-of-00001.safetensors" {
					t.Errorf("weight_map[%s] = %q", name, idx.WeightMap[name])
				}
			}
			if len(idx.WeightMap) != len(got) || idx.Metadata["total_size"] != total || sum.Bytes != total {
				t.Errorf("index %+v, %d tensors of %d bytes, summary %d bytes", idx, len(got), total, sum.Bytes)
			}
			checkAssembled(t, in, out)
			compareFiles(t, in, out)
		})
	}
}

// TestDCPSafetensorsRanks: several ranks write one
// shard-RRRRR-model-00001-of-00001.safetensors per rank holding something
// (RRRRR the rank plus one) and no index, chunked by --split rules or
// whole; the chunks reassemble at their saved_offsets to the input, and
// ckpt reads the directory back as a DCP checkpoint equal to the input.
func TestDCPSafetensorsRanks(t *testing.T) {
	name := regexp.MustCompile(`^shard-0000[1-4]-model-00001-of-00001\.safetensors$`)
	for _, in := range dcpInputs {
		for _, tc := range []struct {
			ranks int
			split string
		}{{2, ""}, {3, "*=0"}, {4, "*.weight=-1"}} {
			t.Run(fmt.Sprintf("%s/%d%s", filepath.Base(in), tc.ranks, tc.split), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "hf")
				sum := convert(t, in, out, hfDCPOpts(t, tc.ranks, tc.split)...)
				if len(sum.Files) == 0 || len(sum.Files) > tc.ranks || sum.Index != "" {
					t.Errorf("files %v index %q", sum.Files, sum.Index)
				}
				for _, f := range sum.Files {
					if !name.MatchString(filepath.Base(f)) {
						t.Errorf("file name %s", f)
					}
				}
				if _, err := os.Stat(filepath.Join(out, "model.safetensors.index.json")); err == nil {
					t.Error("an index beside per-rank files")
				}
				checkAssembled(t, in, out)
				compareFiles(t, in, out)
				ck := open(t, out)
				if ck.Format != statedict.FormatDCP || ck.ShardFormat != statedict.FormatSafetensors {
					t.Errorf("read back as %s/%s", ck.Format, ck.ShardFormat)
				}
			})
		}
	}
}

// TestDCPSafetensorsParts: --part I/N writes only its ranks' files; all
// parts together equal a whole conversion, byte for byte.
func TestDCPSafetensorsParts(t *testing.T) {
	in := fixtures + "model.safetensors"
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole")
	convert(t, in, whole, hfDCPOpts(t, 3, "*=0")...)
	parts := filepath.Join(dir, "parts")
	for i := range 2 {
		sum := convert(t, in, parts, append(hfDCPOpts(t, 3, "*=0"), WithPart(Part{Index: i, Count: 2}))...)
		for _, f := range sum.Files {
			r := 0
			fmt.Sscanf(filepath.Base(f), "shard-%05d", &r)
			if (r-1)%2 != i {
				t.Errorf("part %d wrote %s", i, f)
			}
		}
	}
	want, _ := filepath.Glob(filepath.Join(whole, "*"))
	for _, w := range want {
		a, _ := os.ReadFile(w)
		b, err := os.ReadFile(filepath.Join(parts, filepath.Base(w)))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: parts differ from the whole conversion (%v)", filepath.Base(w), err)
		}
	}
}

// TestDCPSafetensorsDropsValues: non-tensor values, which safetensors
// cannot hold, are listed as dropped; an existing output needs force.
func TestDCPSafetensorsDropsValues(t *testing.T) {
	in := fixtures + "cuda_training.pt"
	if len(objects(t, in)) == 0 {
		t.Fatal("fixture has no values")
	}
	out := filepath.Join(t.TempDir(), "hf")
	sum := convert(t, in, out, hfDCPOpts(t, 1, "")...)
	if len(sum.Values) != 0 || len(sum.Dropped) < len(objects(t, in)) {
		t.Errorf("values %v dropped %v", sum.Values, sum.Dropped)
	}
	if _, err := Convert(t.Context(), open(t, in), out, hfDCPOpts(t, 1, "")...); err == nil {
		t.Error("overwrote an existing output without force")
	}
	if _, err := Convert(t.Context(), open(t, in), out, WithFormat(DCP), WithDCPSerialization("json")); err == nil {
		t.Error("unknown serialization accepted")
	}
}

// hfPy runs testdata/dcp_hf_interop.py.
func hfPy(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), append([]string{"testdata/dcp_hf_interop.py"}, args...)...)
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("dcp_hf_interop.py %v: %v\n%s%s", args, err, out, stderr.String())
	}
}

// TestInteropDCPSafetensors checks the safetensors DCP layout against the
// safetensors library and torch 2.x (no torch 2.8 here: the script stands
// in for its writer and reader with the layout facts of docs/dcp-write.md).
// ckpt's output of interop.py's model (tied, non-contiguous, empty, 0-dim,
// bool, bf16, ... tensors), for 1 rank and for 3 ranks chunked on
// dimension 0 and on the last one, loads with the library, and its
// chunks placed at their saved_offsets equal torch.load's tensors; files
// the script writes with the library as a two-rank save_distributed save
// and as a consolidated one read in ckpt equal to the whole tensors.
func TestInteropDCPSafetensors(t *testing.T) {
	testenv.Require(t, "torch", "numpy", "safetensors")
	dir := t.TempDir()
	py(t, "make", dir)
	orig := filepath.Join(dir, "orig.pt")
	for _, tc := range []struct {
		ranks int
		split string
	}{{1, ""}, {3, "*=0"}, {3, "*=-1"}} {
		out := filepath.Join(dir, fmt.Sprintf("hf%d%s", tc.ranks, tc.split))
		convert(t, orig, out, hfDCPOpts(t, tc.ranks, tc.split)...)
		hfPy(t, "check", out, orig)
	}
	made := filepath.Join(dir, "made")
	hfPy(t, "make", made)
	full := filepath.Join(made, "full.pt")
	for _, sub := range []string{"sharded", "consolidated"} {
		compareFiles(t, full, filepath.Join(made, sub))
	}
	ck := open(t, filepath.Join(made, "sharded"))
	if ck.Format != statedict.FormatDCP || len(ck.Shards) != 2 {
		t.Errorf("sharded: %s with shards %v", ck.Format, ck.Shards)
	}
}

// TestDCPSafetensorsDistcp: a directory as FileSystemWriter with
// serialization_format=SerializationFormat.SAFETENSORS (torch >= 2.8)
// writes it: .metadata as ever, and each __R_0.distcp holding its byte
// items (torch.save of the values) first, then one safetensors file of the
// rank's tensor chunks (names the fqns, DCP_SHARDING_INFO their offsets)
// where every tensor item's storage offset points. ckpt reads it: values,
// and tensors assembled from the safetensors chunks equal the input; a
// safetensors chunk whose saved_offsets disagree with the .metadata is
// flagged on read.
func TestDCPSafetensorsDistcp(t *testing.T) {
	in := fixtures + "model.safetensors"
	src := open(t, in)
	for _, bad := range []bool{false, true} {
		dir := t.TempDir()
		md := &dcp.Metadata{}
		type chunk struct {
			name      string
			off, size []int64
			data      []byte
		}
		ranks := make([][]chunk, 2)
		for _, tn := range src.Tensors {
			full, err := tn.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			e := dcp.Entry{FQN: tn.Name, Tensor: true, DType: tn.DType, Size: tn.Shape}
			if len(tn.Shape) == 0 || tn.Shape[0] < 2 {
				ranks[0] = append(ranks[0], chunk{tn.Name, make([]int64, len(tn.Shape)), tn.Shape, full})
				e.Chunks = []dcp.Chunk{{Offsets: make([]int64, len(tn.Shape)), Sizes: tn.Shape}}
			} else {
				half := tn.Shape[0] / 2
				row := int64(len(full)) / tn.Shape[0]
				for r, rg := range [][2]int64{{0, half}, {half, tn.Shape[0]}} {
					off := make([]int64, len(tn.Shape))
					off[0] = rg[0]
					size := slices.Clone(tn.Shape)
					size[0] = rg[1] - rg[0]
					ranks[r] = append(ranks[r], chunk{tn.Name, off, size, full[rg[0]*row : rg[1]*row]})
					e.Chunks = append(e.Chunks, dcp.Chunk{Offsets: off, Sizes: size})
				}
			}
			md.Entries = append(md.Entries, e)
		}
		md.Entries = append(md.Entries, dcp.Entry{FQN: "step"})
		for r, cs := range ranks {
			var file bytes.Buffer
			if r == 0 {
				n, err := dcp.WriteValue(&file, int64(7))
				if err != nil {
					t.Fatal(err)
				}
				md.Entries[len(md.Entries)-1].Value = dcp.Location{File: dcp.FileName(0), Offset: 0, Length: n}
			}
			begin := int64(file.Len())
			var decl []safetensors.WriterTensor
			info := map[string]map[string][]int64{}
			data := map[string][]byte{}
			for _, c := range cs {
				code, _ := src.Tensors[0].DType.Safetensors()
				for _, tn := range src.Tensors {
					if tn.Name == c.name {
						code, _ = tn.DType.Safetensors()
					}
				}
				decl = append(decl, safetensors.WriterTensor{Name: c.name, DType: code, Shape: c.size})
				off := c.off
				if bad && r == 1 {
					off = make([]int64, len(c.off)) // disagrees with the .metadata
				}
				info[c.name] = map[string][]int64{"saved_offsets": off}
				data[c.name] = c.data
				for i := range md.Entries {
					if md.Entries[i].FQN != c.name {
						continue
					}
					for j := range md.Entries[i].Chunks {
						if slices.Equal(md.Entries[i].Chunks[j].Offsets, c.off) {
							md.Entries[i].Chunks[j].Location = dcp.Location{File: dcp.FileName(r), Offset: begin, Length: int64(len(c.data))}
						}
					}
				}
			}
			js, _ := json.Marshal(info)
			w, err := safetensors.NewWriter(&file, decl, map[string]string{"DCP_SHARDING_INFO": string(js), "DCP_VERSION": "1.0", "format": "pt"})
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
			if err := os.WriteFile(filepath.Join(dir, dcp.FileName(r)), file.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := md.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".metadata"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		ck := open(t, dir)
		if v := objects(t, dir)["step"]; v != int64(7) {
			t.Errorf("value step = %v", v)
		}
		var failed int
		for _, tn := range ck.Tensors {
			got, err := tn.ReadAll()
			if bad {
				if err != nil && strings.Contains(err.Error(), "saved_offsets") {
					failed++
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tn.Name, err)
			}
			for _, st := range src.Tensors {
				if st.Name == tn.Name {
					want, _ := st.ReadAll()
					if !bytes.Equal(got, want) || !slices.Equal(st.Shape, tn.Shape) {
						t.Errorf("%s differs", tn.Name)
					}
				}
			}
		}
		if bad && failed == 0 {
			t.Error("no read failed on saved_offsets that disagree with the .metadata")
		}
	}
}
