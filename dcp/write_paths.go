package dcp

import (
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/pickle"
)

// The planner paths of a DCP save: the keys and planner_data paths that
// torch.distributed.checkpoint.save's default planner (torch 2.6) gives a
// nested state dict, computed from the input's object tree (a .pth, legacy
// or tar input's pickle, or the tree a DCP input's planner_data rebuilds).
//
// torch flattens with flatten_state_dict, which walks the dict with
// traverse_state_dict (torch/distributed/checkpoint/_nested_dict.py and
// _traverse.py): every key of the top dict, and every key of a nested
// Mapping, is visited as str(key); a list is visited item by item, with its
// int index in the path, when one of its items is a tensor, a Mapping or
// such a list; every other node (a tensor, a scalar, a tuple, a list of
// scalars, an empty list) is a leaf. A leaf's fqn is ".".join(map(str,
// path)) and planner_data[fqn] its path. An empty Mapping has no leaf.

// Leaf is one leaf of a state dict as torch's default planner
// flattens it.
type Leaf struct {
	Name  string // the fqn: the path joined with dots, as ckpt names leaves
	Path  []any  // str(key) strings and int64 list indices
	Value any    // the leaf: a *pickle.Tensor or a value
}

// maxFlattenNodes bounds the nodes Flatten visits: past it (a tree of
// shared containers reached along very many paths), the output is flat.
const maxFlattenNodes = 1 << 24

type flattener struct {
	leaves   []Leaf
	terminal map[*pickle.List]bool // decided lists
	busy     map[any]bool          // containers on the current path
	nodes    int
	bad      bool // a cycle, or too many nodes: torch could not save it either
}

// Flatten returns the leaves of root (a state dict's pickle tree) as
// torch's flatten_state_dict lists them, in its order; ok is false when root is not a dict, or
// contains itself (torch's recursion would not end), or is too large.
func Flatten(root any) (leaves []Leaf, ok bool) {
	d, isDict := root.(*pickle.Dict)
	if !isDict {
		return nil, false
	}
	f := &flattener{terminal: map[*pickle.List]bool{}, busy: map[any]bool{}}
	f.visit(nil, "", d)
	if f.bad {
		return nil, false
	}
	return f.leaves, true
}

func (f *flattener) visit(path []any, name string, v any) {
	if f.nodes++; f.bad || f.nodes > maxFlattenNodes {
		f.bad = true
		return
	}
	if f.isTerminal(v) {
		f.leaves = append(f.leaves, Leaf{Name: name, Path: path, Value: v})
		return
	}
	if f.busy[v] {
		f.bad = true
		return
	}
	f.busy[v] = true
	defer delete(f.busy, v)
	child := func(k any) []any { return append(path[:len(path):len(path)], k) }
	switch x := v.(type) {
	case *pickle.Dict:
		for _, e := range x.Entries {
			k := pickle.KeyName(e.Key) // Python's str(key)
			f.visit(child(k), joinKey(name, k), e.Value)
		}
	case *pickle.List:
		for i, it := range *x {
			f.visit(child(int64(i)), joinKey(name, strconv.Itoa(i)), it)
		}
	}
}

// isTerminal is traverse_state_dict's _is_terminal with its default
// keep_traversing (_keep_visiting_tensors: any tensor).
func (f *flattener) isTerminal(v any) bool {
	switch x := v.(type) {
	case *pickle.Dict:
		return false
	case *pickle.List:
		if t, ok := f.terminal[x]; ok {
			return t
		}
		if f.busy[x] { // a list inside itself: torch would recurse forever
			f.bad = true
			return true
		}
		f.busy[x] = true
		t := true
		for _, it := range *x {
			switch y := it.(type) {
			case *pickle.Dict, *pickle.Tensor:
				t = false
			case *pickle.List:
				t = f.isTerminal(y)
			}
			if !t {
				break
			}
		}
		delete(f.busy, x)
		f.terminal[x] = t
		return t
	}
	return true
}

// RenamedPath returns the planner path of a leaf at path renamed from
// old to new (ckpt's --strip-prefix or --rename): the longest proper prefix of path whose
// joined keys, and a dot, begin new, then the rest of new as one string
// key. A rename of the last key stays in its dict ("model.fc.weight" ->
// "model.head.weight": ("model", "head.weight")); a stripped top key
// leaves the flat (new,) ("model.fc.weight" -> "fc.weight").
func RenamedPath(path []any, old, new string) []any {
	if old == new || len(path) == 0 {
		return path
	}
	best, prefix, at := 0, "", 0
	for k := 1; k < len(path); k++ {
		prefix = joinKey(prefix, keyText(path[k-1]))
		if len(new) > len(prefix)+1 && strings.HasPrefix(new, prefix+".") {
			best, at = k, len(prefix)+1
		}
	}
	return append(path[:best:best], new[at:])
}

// keyText is str() of a path key.
func keyText(k any) string {
	if i, ok := k.(int64); ok {
		return strconv.FormatInt(i, 10)
	}
	return k.(string)
}

// ConsistentPaths reports whether planner paths can all be set in one nested
// dict: no path runs through another's leaf, and every container is keyed
// by strings only (a dict) or by ints only (a list), as torch's
// dcp_to_torch_save and ckpt's reader rebuild it.
func ConsistentPaths(paths [][]any) bool {
	type node struct {
		kind byte // 0 new, 'd' dict, 'l' list
		leaf bool
		kids map[any]*node
	}
	root := &node{}
	for _, p := range paths {
		cur := root
		for _, k := range p {
			kind := byte('d')
			if _, ok := k.(int64); ok {
				kind = 'l'
			}
			if cur.leaf || cur.kind != 0 && cur.kind != kind {
				return false
			}
			cur.kind = kind
			if cur.kids == nil {
				cur.kids = map[any]*node{}
			}
			next := cur.kids[k]
			if next == nil {
				next = &node{}
				cur.kids[k] = next
			}
			cur = next
		}
		if cur.leaf || cur.kind != 0 {
			return false
		}
		cur.leaf = true
	}
	return true
}

// joinKey joins a dotted name and a key.
func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}
