package dcp

import (
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

// TestTree: planner paths rebuild nested dicts and None-padded lists;
// contradicting paths, and metadata without planner_data, give no tree.
func TestTree(t *testing.T) {
	leaves := map[string]any{"a.x": int64(1), "a.l.1.y": "s", "b": 2.5}
	md := &Metadata{Planned: true, Entries: []Entry{
		{FQN: "a.x", Path: []any{"a", "x"}},
		{FQN: "a.l.1.y", Path: []any{"a", "l", int64(1), "y"}},
		{FQN: "b", Path: []any{"b"}},
	}}
	root, ok := md.Tree(leaves).(*pickle.Dict)
	if !ok {
		t.Fatal("no tree")
	}
	a, _ := root.Get("a")
	l, _ := a.(*pickle.Dict).Get("l")
	lst := *l.(*pickle.List)
	if len(lst) != 2 || lst[0] != nil {
		t.Fatalf("list %v", lst)
	}
	if y, _ := lst[1].(*pickle.Dict).Get("y"); y != "s" {
		t.Errorf("y = %v", y)
	}
	if b, _ := root.Get("b"); b != 2.5 {
		t.Errorf("b = %v", b)
	}
	// Two leaves at one place, or a leaf where a container must go: flat.
	md.Entries[2].Path = []any{"a", "x"}
	if md.Tree(leaves) != nil {
		t.Error("contradicting paths gave a tree")
	}
	md.Entries[2].Path = []any{"a", "x", "z"}
	if md.Tree(leaves) != nil {
		t.Error("a path through a leaf gave a tree")
	}
	md.Entries[2].Path = []any{"b"}
	md.Planned = false
	if md.Tree(leaves) != nil {
		t.Error("no planner_data gave a tree")
	}
}
