package convert

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// plannerPaths returns the planner_data of a DCP directory.
func plannerPaths(t *testing.T, dir string) (map[string][]any, []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ".metadata"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := dcp.ParseMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	paths := map[string][]any{}
	for _, e := range md.Entries {
		names = append(names, e.FQN)
		paths[e.FQN] = e.Path
	}
	slices.Sort(names)
	return paths, names
}

// TestDCPWriteNested: a DCP input's planner_data (torch's own dcp.save)
// carries through a DCP -> DCP conversion key for key and path for path;
// a training .pt becomes the nesting torch would save (optimizer state
// under str(int) keys, param_groups a list, betas one tuple value), which
// ckpt reads back as the same tree; renames follow renamedPath; a flat
// input stays flat.
func TestDCPWriteNested(t *testing.T) {
	rules, _ := statedict.ParseSplitRules("*=0")
	wantPaths, wantNames := plannerPaths(t, dcpFixture)
	for _, opts := range [][]Option{{WithFormat(DCP)}, {WithFormat(DCP), WithDCPRanks(3), WithSplit(rules)}} {
		out := filepath.Join(t.TempDir(), "dcp")
		sum := convert(t, dcpFixture, out, opts...)
		paths, names := plannerPaths(t, out)
		if !reflect.DeepEqual(names, wantNames) || !reflect.DeepEqual(paths, wantPaths) {
			t.Errorf("DCP -> DCP:\n got %v %v\nwant %v %v", names, paths, wantNames, wantPaths)
		}
		if sum.Structure != "tree" {
			t.Errorf("structure %q", sum.Structure)
		}
	}

	out := filepath.Join(t.TempDir(), "dcp")
	convert(t, fixtures+"cuda_training.pt", out, WithFormat(DCP), WithDCPRanks(2))
	paths, _ := plannerPaths(t, out)
	for name, want := range map[string][]any{
		"model.0.weight":                 {"model", "0.weight"},
		"optimizer.state.1.exp_avg":      {"optimizer", "state", "1", "exp_avg"},
		"optimizer.param_groups.0.betas": {"optimizer", "param_groups", int64(0), "betas"},
		"optimizer.param_groups.0.lr":    {"optimizer", "param_groups", int64(0), "lr"},
		"epoch":                          {"epoch"},
	} {
		if !reflect.DeepEqual(paths[name], want) {
			t.Errorf("%s: path %#v, want %#v", name, paths[name], want)
		}
	}
	if _, ok := paths["optimizer.param_groups.0.betas.0"]; ok {
		t.Error("betas written item by item")
	}
	in, back := open(t, fixtures+"cuda_training.pt"), open(t, out)
	if got, want := treeShape(back.Root), treeShape(in.Root); got != want {
		t.Errorf("tree read back:\n got %s\nwant %s", got, want)
	}

	out = filepath.Join(t.TempDir(), "dcp")
	convert(t, fixtures+"cuda_training.pt", out, WithFormat(DCP), WithStripPrefix("model."),
		WithRename(Rename{regexp.MustCompile(`^optimizer\.param_groups\.0\.lr$`), "optimizer.param_groups.0.rate"}))
	paths, _ = plannerPaths(t, out)
	for name, want := range map[string][]any{
		"0.weight":                      {"0.weight"},
		"optimizer.state.1.exp_avg":     {"optimizer", "state", "1", "exp_avg"},
		"optimizer.param_groups.0.rate": {"optimizer", "param_groups", int64(0), "rate"},
	} {
		if !reflect.DeepEqual(paths[name], want) {
			t.Errorf("renamed %s: path %#v, want %#v", name, paths[name], want)
		}
	}

	out = filepath.Join(t.TempDir(), "dcp")
	if sum := convert(t, fixtures+"model.safetensors", out, WithFormat(DCP)); sum.Structure != "flat" {
		t.Errorf("safetensors: structure %q", sum.Structure)
	}
	paths, _ = plannerPaths(t, out)
	for name, p := range paths {
		if !reflect.DeepEqual(p, []any{name}) {
			t.Errorf("safetensors %s: path %v", name, p)
		}
	}
}

// treeShape writes a tree's containers and key types, tensors as "T" and
// values as their Python repr (tuples as lists: a DCP value read back
// keeps them, the input's too).
func treeShape(v any) string {
	switch x := v.(type) {
	case *pickle.Dict:
		s := "{"
		for _, e := range x.Entries {
			s += fmt.Sprintf("%s: %s, ", pickle.Repr(pickle.KeyName(e.Key)), treeShape(e.Value))
		}
		return s + "}"
	case *pickle.List:
		return seqShape(*x)
	case *pickle.Tuple:
		return seqShape(*x)
	case *pickle.Tensor:
		return "T"
	}
	return pickle.Repr(v)
}

func seqShape(items []any) string {
	s := "["
	for _, it := range items {
		s += treeShape(it) + ", "
	}
	return s + "]"
}

// TestDCPWriteTensorValue: a leaf torch saves whole although it holds
// tensors (a tuple of tensors, a list of such tuples) is one value item,
// the torch.save of the leaf with its tensors, at its own path; ckpt reads
// its tensors back under the input's names, byte for byte, and the parts
// of a split conversion, which size such values without their data, add
// up to the single process's output.
func TestDCPWriteTensorValue(t *testing.T) {
	dir := t.TempDir()
	specs := []dcp.TensorSpec{
		{DType: dtype.Float32, Shape: []int64{2, 3}},
		{DType: dtype.Int64, Shape: []int64{4}},
		{DType: dtype.BFloat16, Shape: []int64{3}, RequiresGrad: true},
	}
	pair := pickle.Tuple{specs[0].Ref("0"), int64(1)}
	inner := pickle.Tuple{specs[2].Ref("2")}
	opt := pickle.List{&inner}
	tree := &pickle.Dict{Entries: []pickle.DictEntry{
		{Key: "pair", Value: &pair},
		{Key: "w", Value: specs[1].Ref("1")},
		{Key: "x", Value: &pickle.Dict{Entries: []pickle.DictEntry{{Key: "opt", Value: &opt}}}},
	}}
	src := filepath.Join(dir, "src.pt")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dcp.WriteValueTensors(f, tree, specs, func(i int) (io.Reader, error) {
		b := make([]byte, specs[i].NBytes())
		for j := range b {
			b[j] = byte(17*i + j)
		}
		return bytes.NewReader(b), nil
	}, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	one := filepath.Join(dir, "one")
	sum := convert(t, src, one, WithFormat(DCP), WithDCPRanks(2))
	if sum.Tensors != 3 || sum.Bytes != specs[0].NBytes()+specs[1].NBytes()+specs[2].NBytes() {
		t.Errorf("%d tensors, %d bytes", sum.Tensors, sum.Bytes)
	}
	b, err := os.ReadFile(filepath.Join(one, ".metadata"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := dcp.ParseMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	paths := map[string][]any{}
	for _, e := range md.Entries {
		kinds[e.FQN] = e.Tensor
		paths[e.FQN] = e.Path
	}
	if !reflect.DeepEqual(kinds, map[string]bool{"pair": false, "w": true, "x.opt": false}) ||
		!reflect.DeepEqual(paths["x.opt"], []any{"x", "opt"}) {
		t.Errorf("items %v, paths %v", kinds, paths)
	}
	compareFiles(t, src, one)
	if want, got := objects(t, src), objects(t, one); !reflect.DeepEqual(want, got) {
		t.Errorf("values differ:\n got %v\nwant %v", got, want)
	}
	parts := filepath.Join(dir, "parts")
	runParts(t, src, parts, 2, WithFormat(DCP), WithDCPRanks(2))
	want, got := readDir(t, one), readDir(t, parts)
	if !reflect.DeepEqual(want, got) {
		t.Error("2 parts differ from one process")
	}
}
