package convert

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

func treePy(t *testing.T, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), append([]string{"testdata/tree.py"}, args...)...)
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("tree.py %v: %v\n%s%s", args, err, out, stderr.String())
	}
}

func cpuRules(t *testing.T) Option {
	t.Helper()
	r, err := remap.Parse("cpu")
	if err != nil {
		t.Fatal(err)
	}
	return WithRules(r)
}

// droppedNames returns the sorted names of the dropped entries.
func droppedNames(s *Summary) []string {
	var out []string
	for _, d := range s.Dropped {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out
}

// TestInteropTreeTraining: a training checkpoint converted with
// --map-location cpu loads in torch (weights_only=False on 1.13) as the
// same tree as the original loaded on the cpu, opaque values aside, and
// its optimizer state drives an Adam optimizer.
func TestInteropTreeTraining(t *testing.T) {
	needTorch(t)
	for _, c := range []struct {
		file    string
		dropped []string
	}{
		{"training.pt", []string{"args", "np_array", "np_value"}},
		{"cuda_training.pt", nil},
	} {
		t.Run(c.file, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "cpu.pt")
			sum := convert(t, fixtures+c.file, out, cpuRules(t))
			if sum.Structure != "tree" {
				t.Fatalf("structure %q", sum.Structure)
			}
			if got := droppedNames(sum); !slices.Equal(got, c.dropped) {
				t.Errorf("dropped %v, want %v", got, c.dropped)
			}
			treePy(t, append([]string{"full", out, fixtures + c.file}, c.dropped...)...)
		})
	}
}

// TestInteropTreeDropFloats: with WithDropFloats the converted training
// checkpoints load with torch 1.13's weights_only=True loader, holding
// everything but the floats (and tuples of floats) and opaque values.
func TestInteropTreeDropFloats(t *testing.T) {
	needTorch(t)
	for _, f := range []string{"training.pt", "cuda_training.pt"} {
		out := filepath.Join(t.TempDir(), "wo.pt")
		sum := convert(t, fixtures+f, out, cpuRules(t), WithDropFloats(true))
		if sum.Floats != 0 || sum.Structure != "tree" {
			t.Errorf("%s: %d floats kept, structure %q", f, sum.Floats, sum.Structure)
		}
		treePy(t, "weightsonly", out, fixtures+f)
	}
}

// TestInteropTreeStateDicts: plain state dicts keep loading with
// weights_only=True on torch 1.13 (they hold no floats), tied storages
// tied, and equal the original.
func TestInteropTreeStateDicts(t *testing.T) {
	needTorch(t)
	for _, f := range []string{"zip_basic.pt", "tied.pt", "params.pt", "cuda_tagged.pt", "legacy.pt", "tar.pt", "root_tensor.pt", "dtypes_classic.pt"} {
		out := filepath.Join(t.TempDir(), "out.pt")
		sum := convert(t, fixtures+f, out, cpuRules(t))
		if sum.Structure != "tree" || sum.Floats != 0 {
			t.Errorf("%s: structure %q, %d floats", f, sum.Structure, sum.Floats)
		}
		treePy(t, "weightsonly", out, fixtures+f)
		treePy(t, "full", out, fixtures+f)
	}
}

// TestTreeSummary: the training fixture keeps its structure, names and
// counts; options that rename fall back to the flat state dict.
func TestTreeSummary(t *testing.T) {
	dir := t.TempDir()
	sum := convert(t, fixtures+"training.pt", filepath.Join(dir, "a.pt"))
	// floats: loss, config.lr, param_groups lr, betas 0 and 1, eps
	if sum.Structure != "tree" || sum.Floats != 6 || sum.Torch2Values != 0 {
		t.Errorf("structure %q, floats %d, torch2 %d", sum.Structure, sum.Floats, sum.Torch2Values)
	}
	for _, v := range []string{"epoch", "loss", "optimizer.param_groups.0.betas.1", "optimizer.param_groups.0.params.3", "config.layers.0", "none"} {
		if !slices.Contains(sum.Values, v) {
			t.Errorf("values lack %q: %v", v, sum.Values)
		}
	}
	ck := open(t, filepath.Join(dir, "a.pt"))
	root, ok := ck.Root.(*pickle.Dict)
	if !ok || root.Class != "" {
		t.Fatalf("root %T", ck.Root)
	}
	opt, _ := root.Get("optimizer")
	state, _ := opt.(*pickle.Dict).Get("state")
	if k := state.(*pickle.Dict).Entries[0].Key; k != int64(0) {
		t.Errorf("optimizer state key %#v, want int 0", k)
	}
	model, _ := root.Get("model")
	if md := model.(*pickle.Dict); md.Class != "collections.OrderedDict" || md.State == nil {
		t.Errorf("model state dict: class %q, attributes %v", md.Class, md.State)
	}
	if len(ck.Tensors) != sum.Tensors || sum.Tensors != 4+4*3 {
		t.Errorf("%d tensors read back, %d written", len(ck.Tensors), sum.Tensors)
	}

	sum = convert(t, fixtures+"training.pt", filepath.Join(dir, "b.pt"), WithDropFloats(true))
	var floats []string
	for _, d := range sum.Dropped {
		if strings.Contains(d.Reason, "--drop-floats") {
			floats = append(floats, d.Name)
		}
	}
	sort.Strings(floats)
	want := []string{"config.lr", "loss", "optimizer.param_groups.0.betas", "optimizer.param_groups.0.eps", "optimizer.param_groups.0.lr"}
	if !slices.Equal(floats, want) || sum.Floats != 0 {
		t.Errorf("dropped floats %v, want %v (%d kept)", floats, want, sum.Floats)
	}

	sum = convert(t, fixtures+"training.pt", filepath.Join(dir, "c.pt"), WithStripPrefix("model."))
	if sum.Structure != "flat" || sum.Floats != 6 {
		t.Errorf("with a rename: structure %q, %d floats", sum.Structure, sum.Floats)
	}
	if convert(t, fixtures+"model.safetensors", filepath.Join(dir, "d.pt")).Structure != "flat" {
		t.Error("safetensors input written as a tree")
	}
}

// TestTreeCast: --dtype casts the tree's tensors and leaves step counters.
func TestTreeCast(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bf16.pt")
	sum := convert(t, fixtures+"training.pt", out, WithDType(dtype.BFloat16))
	if sum.Structure != "tree" || sum.Casts != 4+4*2 {
		t.Errorf("structure %q, %d casts", sum.Structure, sum.Casts)
	}
	for _, tn := range open(t, out).Tensors {
		want := dtype.BFloat16
		if strings.HasSuffix(tn.Name, ".step") {
			want = dtype.Float32
		}
		if tn.DType != want {
			t.Errorf("%s: %s, want %s", tn.Name, tn.DType, want)
		}
	}
}

// TestTreePlanRules: tensors inside left-out objects make the tree fall
// back to the flat state dict; sequences are kept or dropped whole; dict
// keys keep their types; cycles stay cycles.
func TestTreePlanRules(t *testing.T) {
	s1 := &statedict.Storage{Key: "0", Location: "cuda:0", DType: dtype.Float32, NBytes: 8}
	s2 := &statedict.Storage{Key: "1", Location: "cpu", DType: dtype.Float32, NBytes: 8}
	pt := func(s *statedict.Storage) *pickle.Tensor {
		return &pickle.Tensor{Storage: &pickle.StorageRef{Ref: s}, DType: "float32", Shape: []int64{2}, Stride: []int64{1}}
	}
	st := func(name string, s *statedict.Storage) *statedict.Tensor {
		return &statedict.Tensor{Name: name, DType: dtype.Float32, Shape: []int64{2}, Strides: []int64{1}, Storage: s, Layout: statedict.Strided}
	}
	w, b := pt(s1), pt(s2)
	inObject := &pickle.Dict{Entries: []pickle.DictEntry{
		{Key: "model", Value: &pickle.Foreign{Module: "m", Name: "Net", State: &pickle.Dict{Entries: []pickle.DictEntry{{Key: "w", Value: w}}}}},
		{Key: "b", Value: b}}}
	ck := &statedict.Checkpoint{Root: inObject, Tensors: []*statedict.Tensor{st("model.w", s1), st("b", s2)}}
	p, err := makePlan(ck, &config{}, PyTorch)
	if err != nil || p.tree != nil || len(p.items) != 2 {
		t.Fatalf("tensor inside an object: tree %v, %d items, %v", p != nil && p.tree != nil, len(p.items), err)
	}

	self := &pickle.List{}
	*self = append(*self, self)
	sparse := &pickle.Tensor{Layout: "sparse_coo", DType: "float32", Components: []pickle.NamedTensor{{Name: "values", Tensor: pt(s2)}}}
	ck.Root = &pickle.Dict{Entries: []pickle.DictEntry{
		{Key: int64(3), Value: w},
		{Key: "w_again", Value: w},
		{Key: "betas", Value: &pickle.Tuple{0.9, 0.999}},
		{Key: "mixed", Value: &pickle.List{b, sparse}},
		{Key: "self", Value: self},
		{Key: &pickle.Tuple{"k", 1.5}, Value: "float in a key"},
		{Key: []byte("raw"), Value: &pickle.List{[]byte{1}, complex(1, 2), pickle.Device("cuda:1"), &pickle.Set{Items: []any{int64(1)}}}},
	}}
	ck.Tensors = []*statedict.Tensor{st("3", s1), st("w_again", s1)}
	p, err = makePlan(ck, &config{}, PyTorch)
	if err != nil || p.tree == nil || p.tree.newer != 5 || p.tree.floats != 3 {
		t.Fatalf("without WithDropFloats: %v", err)
	}
	p, err = makePlan(ck, &config{options: options{dropFloats: true}}, PyTorch)
	if err != nil || p.tree == nil {
		t.Fatalf("tree: %v", err)
	}
	reasons := map[string]string{}
	for _, d := range p.dropped {
		reasons[d.Name] = d.Reason
	}
	if len(reasons) != 4 || !strings.HasPrefix(reasons["b'raw'"], "key bytes: torch 1.13") || !strings.HasPrefix(reasons["betas"], "item 0: float") ||
		!strings.HasPrefix(reasons["mixed"], "item 1: sparse") || !strings.HasPrefix(reasons["('k', 1.5)"], "key item 1: float") {
		t.Errorf("dropped %v", reasons)
	}
	root := p.tree.root.(*pickle.Dict)
	if len(root.Entries) != 3 || root.Entries[0].Key != int64(3) || root.Entries[0].Value != root.Entries[1].Value {
		t.Fatalf("root %+v", root.Entries)
	}
	if got := *root.Entries[2].Value.(*pickle.List); got[0] != root.Entries[2].Value {
		t.Error("self-containing list lost its cycle")
	}
	if len(p.tree.storages) != 1 || len(p.items) != 1 {
		t.Errorf("%d storages, %d tensors for one shared tensor", len(p.tree.storages), len(p.items))
	}
}
