package torchzip

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"os/exec"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/pickle"
)

// sampleTree holds every node kind EncodeTree writes, a shared dict, a
// list that contains itself and a repeated long string.
func sampleTree() *pickle.Dict {
	shared := &pickle.Dict{Entries: []pickle.DictEntry{{Key: "version", Value: int64(1)}}}
	self := &pickle.List{int64(1)}
	*self = append(*self, self)
	long := strings.Repeat("long string ", 10)
	st := &StorageRef{Key: "0", DType: dtype.Float32, Location: "cuda:1", NumEl: 6}
	w := &TensorRef{Storage: st, Shape: []int64{2, 3}, Strides: []int64{3, 1}, Parameter: true, RequiresGrad: true}
	big1, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	many := make(pickle.List, 2500)
	for i := range many {
		many[i] = int64(i)
	}
	return &pickle.Dict{Entries: []pickle.DictEntry{
		{Key: "model", Value: &pickle.Dict{Class: "collections.OrderedDict",
			Entries: []pickle.DictEntry{{Key: "w", Value: w}, {Key: "w_view", Value: &TensorRef{Storage: st, Offset: 3, Shape: []int64{3}, Strides: []int64{1}}}},
			State:   &pickle.Dict{Entries: []pickle.DictEntry{{Key: "_metadata", Value: &pickle.Dict{Entries: []pickle.DictEntry{{Key: "", Value: shared}}}}}}}},
		{Key: "optimizer", Value: &pickle.Dict{Entries: []pickle.DictEntry{
			{Key: "state", Value: &pickle.Dict{Entries: []pickle.DictEntry{{Key: int64(0), Value: &pickle.Dict{Entries: []pickle.DictEntry{{Key: "exp_avg", Value: w}}}}}}},
			{Key: "param_groups", Value: &pickle.List{&pickle.Dict{Entries: []pickle.DictEntry{
				{Key: "lr", Value: 0.001}, {Key: "betas", Value: &pickle.Tuple{0.9, 0.999}}, {Key: "params", Value: &pickle.List{int64(0)}}}}}},
		}}},
		{Key: "shared_again", Value: shared},
		{Key: "self", Value: self},
		{Key: "leaves", Value: &pickle.Tuple{nil, true, false, int64(0), int64(255), int64(256), int64(-1), int64(1 << 40), int64(math.MinInt64), big1,
			math.Inf(-1), math.Copysign(0, -1), 1e-308, "", "héllo", long, long, []byte{0, 0xff, 'a'}, []byte{}, complex(1.5, -2),
			pickle.Device("cuda:1"), &pickle.Set{Items: []any{int64(1), "a"}}, &pickle.Tuple{}, &pickle.List{}, &pickle.Dict{}}},
		{Key: &pickle.Tuple{int64(1), "k"}, Value: "tuple key"},
		{Key: int64(-5), Value: &many},
		{Key: nil, Value: math.NaN()},
	}}
}

func TestEncodeTreeRoundTrip(t *testing.T) {
	pkl, err := EncodeTree(sampleTree())
	if err != nil {
		t.Fatal(err)
	}
	v, err := pickle.Unpickle(pkl)
	if err != nil {
		t.Fatal(err)
	}
	root := v.(*pickle.Dict)
	if root.Class != "" || len(root.Entries) != 8 {
		t.Fatalf("root %+v", root)
	}
	get := func(d any, k any) any {
		t.Helper()
		x, ok := d.(*pickle.Dict).Get(k)
		if !ok {
			t.Fatalf("no key %#v", k)
		}
		return x
	}
	model := get(root, "model").(*pickle.Dict)
	if model.Class != "collections.OrderedDict" {
		t.Errorf("model class %q", model.Class)
	}
	w := get(model, "w").(*pickle.Tensor)
	if !w.Parameter || !w.RequiresGrad || w.Storage.Location != "cuda:1" || w.Storage.Class != "FloatStorage" || w.Storage.Numel != 6 ||
		w.DType != "float32" || !equalInts(w.Shape, 2, 3) || !equalInts(w.Stride, 3, 1) {
		t.Errorf("w %+v %+v", w, w.Storage)
	}
	view := get(model, "w_view").(*pickle.Tensor)
	if view.Parameter || view.Offset != 3 || view.Storage.Key != "0" {
		t.Errorf("view %+v", view)
	}
	shared := get(get(get(model.State, "_metadata"), ""), "version")
	if shared != int64(1) || get(root, "shared_again") != get(get(model.State, "_metadata"), "") {
		t.Errorf("shared dict not shared: %v", shared)
	}
	opt := get(root, "optimizer")
	if get(get(get(opt, "state"), int64(0)), "exp_avg") != w {
		t.Error("tensor referenced twice was not memoized")
	}
	pg := (*get(opt, "param_groups").(*pickle.List))[0]
	if get(pg, "lr") != 0.001 || (*get(pg, "betas").(*pickle.Tuple))[1] != 0.999 {
		t.Errorf("param group %+v", pg)
	}
	self := get(root, "self").(*pickle.List)
	if len(*self) != 2 || (*self)[1] != self {
		t.Errorf("self-containing list %v", *self)
	}
	leaves := *get(root, "leaves").(*pickle.Tuple)
	big1, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	if leaves[9].(*big.Int).Cmp(big1) != 0 {
		t.Errorf("big int %v", leaves[9])
	}
	want := []any{nil, true, false, int64(0), int64(255), int64(256), int64(-1), int64(1 << 40), int64(math.MinInt64)}
	for i, x := range want {
		if leaves[i] != x {
			t.Errorf("leaf %d: %#v, want %#v", i, leaves[i], x)
		}
	}
	if leaves[10] != math.Inf(-1) || math.Float64bits(leaves[11].(float64)) != 1<<63 || leaves[12] != 1e-308 {
		t.Errorf("floats %v %v %v", leaves[10], leaves[11], leaves[12])
	}
	long := strings.Repeat("long string ", 10)
	if leaves[13] != "" || leaves[14] != "héllo" || leaves[15] != long || leaves[16] != long {
		t.Errorf("strings %q %q", leaves[13], leaves[14])
	}
	if !bytes.Equal(leaves[17].([]byte), []byte{0, 0xff, 'a'}) || len(leaves[18].([]byte)) != 0 {
		t.Errorf("bytes %v %v", leaves[17], leaves[18])
	}
	if leaves[19] != complex(1.5, -2) || leaves[20] != pickle.Device("cuda:1") {
		t.Errorf("complex, device: %v %v", leaves[19], leaves[20])
	}
	if s := leaves[21].(*pickle.Set); s.Frozen || len(s.Items) != 2 || s.Items[0] != int64(1) || s.Items[1] != "a" {
		t.Errorf("set %+v", leaves[21])
	}
	if len(*leaves[22].(*pickle.Tuple)) != 0 || len(*leaves[23].(*pickle.List)) != 0 || len(leaves[24].(*pickle.Dict).Entries) != 0 {
		t.Errorf("empty containers %v %v %v", leaves[22], leaves[23], leaves[24])
	}
	if k := root.Entries[5].Key.(*pickle.Tuple); len(*k) != 2 || (*k)[0] != int64(1) || root.Entries[5].Value != "tuple key" {
		t.Errorf("tuple key %v", root.Entries[5])
	}
	many := *get(root, int64(-5)).(*pickle.List)
	if len(many) != 2500 || many[2499] != int64(2499) {
		t.Errorf("%d items", len(many))
	}
	if f := get(root, nil).(float64); !math.IsNaN(f) {
		t.Errorf("NaN: %v", f)
	}
}

func equalInts(got []int64, want ...int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestEncodeTreeMemo: a long string used many times and a shared list are
// written once, so the pickle grows with the distinct values only.
func TestEncodeTreeMemo(t *testing.T) {
	s := strings.Repeat("x", 1<<16)
	inner := &pickle.List{s}
	outer := make(pickle.List, 300)
	for i := range outer {
		outer[i] = s
		if i%2 == 1 {
			outer[i] = inner
		}
	}
	pkl, err := EncodeTree(&outer)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkl) > len(s)+2000 {
		t.Errorf("pickle of %d bytes for one %d-byte string", len(pkl), len(s))
	}
	v, err := pickle.Unpickle(pkl)
	if err != nil {
		t.Fatal(err)
	}
	got := *v.(*pickle.List)
	if got[298] != s || got[299] != got[1] || (*got[299].(*pickle.List))[0] != s {
		t.Error("memoized values differ")
	}
}

func TestEncodeTreeRefuses(t *testing.T) {
	loop := &pickle.Tuple{nil}
	(*loop)[0] = &pickle.List{loop}
	st := &StorageRef{Key: "0", DType: dtype.Float32, Location: "cpu", NumEl: 1}
	for _, c := range []struct {
		v    any
		want error
		path string
	}{
		{&pickle.Set{Frozen: true}, ErrUnsupportedValue, ""},
		{&pickle.Dict{Class: "collections.Counter"}, ErrUnsupportedValue, ""},
		{&pickle.Dict{Entries: []pickle.DictEntry{{Key: "a", Value: &pickle.List{int64(1), &pickle.Object{Module: "argparse", Name: "Namespace"}}}}}, ErrUnsupportedValue, "a.1"},
		{&pickle.Dict{State: &pickle.Dict{}}, ErrUnsupportedValue, ""},
		{&pickle.Dict{Class: "collections.OrderedDict", State: &pickle.Dict{Entries: []pickle.DictEntry{{Key: int64(1), Value: nil}}}}, ErrUnsupportedValue, ""},
		{loop, ErrInvalid, "0.0"},
		{new(big.Int).Lsh(big.NewInt(1), 2100), ErrUnsupportedValue, ""},
		{&pickle.List{&TensorRef{Storage: st, Shape: []int64{1}}}, ErrInvalid, "0"},
		{&TensorRef{Storage: &StorageRef{Key: "0", DType: dtype.Invalid, Location: "cpu"}}, ErrUnsupportedDType, ""},
		{pickle.Global{Module: "torch", Name: "float32"}, ErrUnsupportedValue, ""},
	} {
		_, err := EncodeTree(c.v)
		var re *RecordError
		if !errors.Is(err, c.want) || !errors.As(err, &re) || re.Name != c.path {
			t.Errorf("%#v: %v, want %v at %q", c.v, err, c.want, c.path)
		}
	}
}

// TestInteropTreePython: Python's own unpickler reads what EncodeTree
// writes (no tensors: storages need torch.load) as the same values.
func TestInteropTreePython(t *testing.T) {
	testenv.Require(t, "pickle")
	self := &pickle.List{}
	*self = append(*self, self)
	tree := &pickle.Dict{Class: "collections.OrderedDict", Entries: []pickle.DictEntry{
		{Key: int64(0), Value: &pickle.Tuple{nil, true, int64(-70000), new(big.Int).Lsh(big.NewInt(-3), 70), 0.25, math.Inf(1), "é"}},
		{Key: "bytes", Value: []byte{0, 0x80, 0xff}},
		{Key: "set", Value: &pickle.Set{Items: []any{int64(2), "x"}}},
		{Key: "complex", Value: complex(1, -0.5)},
		{Key: &pickle.Tuple{"k", int64(1)}, Value: &pickle.List{&pickle.Dict{}, self}},
	}, State: &pickle.Dict{Entries: []pickle.DictEntry{{Key: "_metadata", Value: &pickle.Dict{Entries: []pickle.DictEntry{{Key: "", Value: int64(1)}}}}}}}
	pkl, err := EncodeTree(tree)
	if err != nil {
		t.Fatal(err)
	}
	script := `import pickle, sys, collections
v = pickle.loads(sys.stdin.buffer.read())
s = v[("k", 1)][1]
assert s[0] is s, s
want = collections.OrderedDict([(0, (None, True, -70000, -3 << 70, 0.25, float("inf"), "é")), ("bytes", b"\x00\x80\xff"),
    ("set", {2, "x"}), ("complex", complex(1, -0.5)), (("k", 1), [{}, s])])
assert type(v) is collections.OrderedDict and v == want and list(v) == list(want), v
assert v._metadata == {"": 1}, v.__dict__
print("ok")`
	cmd := exec.Command(testenv.Python(), "-c", script)
	cmd.Stdin = bytes.NewReader(pkl)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("python: %v\n%s", err, out)
	}
}
