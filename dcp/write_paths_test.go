package dcp

import (
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

// TestFlatten: the leaves and planner paths of a nested state dict
// are those of torch 2.6's flatten_state_dict: str(key) for every dict key
// (int keys included), int indices into lists holding a tensor, a dict or
// such a list; tuples, lists of scalars and empty lists are one leaf each,
// empty dicts none.
func TestFlatten(t *testing.T) {
	tn := func() *pickle.Tensor { return &pickle.Tensor{DType: "float32"} }
	d := func(kv ...any) *pickle.Dict {
		out := &pickle.Dict{}
		for i := 0; i < len(kv); i += 2 {
			out.Entries = append(out.Entries, pickle.DictEntry{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	list := func(v ...any) *pickle.List { l := pickle.List(v); return &l }
	tup := func(v ...any) *pickle.Tuple { l := pickle.Tuple(v); return &l }
	model := d("fc.weight", tn(), "fc.bias", tn())
	model.Class = "collections.OrderedDict"
	root := d(
		"model", model,
		"optim", d(
			"state", d(int64(0), d("step", tn(), "exp_avg", tn())),
			"param_groups", list(d("lr", 0.1, "betas", tup(0.9, 0.99), "params", list(int64(0), int64(1))))),
		"step", int64(7),
		"hist", list(int64(1), 2.5),
		"mixed", list(tn(), int64(3)),
		"deep", list(list(int64(1)), list(tn())),
		"scalars", list(list(int64(1)), list()),
		"tup", tup(tn(), int64(1)),
		"empty", d(),
		"none", list(),
		true, nil,
	)
	leaves, ok := Flatten(root)
	if !ok {
		t.Fatal("not flattened")
	}
	type leaf struct {
		name   string
		path   []any
		tensor bool
	}
	var got []leaf
	for _, l := range leaves {
		_, isT := l.Value.(*pickle.Tensor)
		got = append(got, leaf{l.Name, l.Path, isT})
	}
	want := []leaf{
		{"model.fc.weight", []any{"model", "fc.weight"}, true},
		{"model.fc.bias", []any{"model", "fc.bias"}, true},
		{"optim.state.0.step", []any{"optim", "state", "0", "step"}, true},
		{"optim.state.0.exp_avg", []any{"optim", "state", "0", "exp_avg"}, true},
		{"optim.param_groups.0.lr", []any{"optim", "param_groups", int64(0), "lr"}, false},
		{"optim.param_groups.0.betas", []any{"optim", "param_groups", int64(0), "betas"}, false},
		{"optim.param_groups.0.params", []any{"optim", "param_groups", int64(0), "params"}, false},
		{"step", []any{"step"}, false},
		{"hist", []any{"hist"}, false},
		{"mixed.0", []any{"mixed", int64(0)}, true},
		{"mixed.1", []any{"mixed", int64(1)}, false},
		{"deep.0", []any{"deep", int64(0)}, false},
		{"deep.1.0", []any{"deep", int64(1), int64(0)}, true},
		{"scalars", []any{"scalars"}, false},
		{"tup", []any{"tup"}, false},
		{"none", []any{"none"}, false},
		{"True", []any{"True"}, false},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("leaves:\n got %v\nwant %v", got, want)
	}
	// Not a dict, or a list holding itself: no nesting (torch cannot save it).
	if _, ok := Flatten(list(tn())); ok {
		t.Error("a list root flattened")
	}
	cyc := list(int64(1))
	*cyc = append(*cyc, cyc)
	if _, ok := Flatten(d("c", cyc)); ok {
		t.Error("a cyclic list flattened")
	}
}

// TestRenamedPath: a renamed leaf keeps the longest part of its path that
// still begins its new name.
func TestRenamedPath(t *testing.T) {
	for _, tc := range []struct {
		path     []any
		old, new string
		want     []any
	}{
		{[]any{"model", "fc.weight"}, "model.fc.weight", "model.fc.weight", []any{"model", "fc.weight"}},
		{[]any{"model", "fc.weight"}, "model.fc.weight", "model.head.weight", []any{"model", "head.weight"}},
		{[]any{"model", "fc.weight"}, "model.fc.weight", "fc.weight", []any{"fc.weight"}},
		{[]any{"model", "fc.weight"}, "model.fc.weight", "modelx.fc.weight", []any{"modelx.fc.weight"}},
		{[]any{"o", "g", int64(0), "lr"}, "o.g.0.lr", "o.g.0.rate", []any{"o", "g", int64(0), "rate"}},
		{[]any{"o", "g", int64(0), "lr"}, "o.g.0.lr", "o.g.x", []any{"o", "g", "x"}},
	} {
		if got := RenamedPath(tc.path, tc.old, tc.new); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v %s -> %s: got %v, want %v", tc.path, tc.old, tc.new, got, tc.want)
		}
	}
	for _, tc := range []struct {
		paths [][]any
		ok    bool
	}{
		{[][]any{{"a", "b"}, {"a", "c"}, {"l", int64(0)}, {"l", int64(2), "x"}}, true},
		{[][]any{{"a", "b"}, {"a"}}, false},
		{[][]any{{"a"}, {"a", "b"}}, false},
		{[][]any{{"l", int64(0)}, {"l", "x"}}, false},
		{[][]any{{"a"}, {"a"}}, false},
	} {
		if got := ConsistentPaths(tc.paths); got != tc.ok {
			t.Errorf("%v: consistent %v, want %v", tc.paths, got, tc.ok)
		}
	}
}
