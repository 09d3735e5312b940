package convert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Nested DCP outputs: the keys and planner_data paths that
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

// torchLeaf is one leaf of a state dict as torch's default planner
// flattens it.
type torchLeaf struct {
	name string // the fqn: the path joined with dots, as ckpt names leaves
	path []any  // str(key) strings and int64 list indices
	v    any    // the leaf: a *pickle.Tensor or a value
}

// maxFlattenNodes bounds the nodes torchFlatten visits: past it (a tree of
// shared containers reached along very many paths), the output is flat.
const maxFlattenNodes = 1 << 24

type flattener struct {
	leaves   []torchLeaf
	terminal map[*pickle.List]bool // decided lists
	busy     map[any]bool          // containers on the current path
	nodes    int
	bad      bool // a cycle, or too many nodes: torch could not save it either
}

// torchFlatten returns the leaves of root as torch's flatten_state_dict
// lists them, in its order; ok is false when root is not a dict, or
// contains itself (torch's recursion would not end), or is too large.
func torchFlatten(root any) (leaves []torchLeaf, ok bool) {
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
		f.leaves = append(f.leaves, torchLeaf{name: name, path: path, v: v})
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
			f.visit(child(k), join(name, k), e.Value)
		}
	case *pickle.List:
		for i, it := range *x {
			f.visit(child(int64(i)), join(name, strconv.Itoa(i)), it)
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

// renamedPath is the path of a leaf renamed from old to new by
// --strip-prefix or --rename: the longest proper prefix of path whose
// joined keys, and a dot, begin new, then the rest of new as one string
// key. A rename of the last key stays in its dict ("model.fc.weight" ->
// "model.head.weight": ("model", "head.weight")); a stripped top key
// leaves the flat (new,) ("model.fc.weight" -> "fc.weight").
func renamedPath(path []any, old, new string) []any {
	if old == new || len(path) == 0 {
		return path
	}
	best, prefix, at := 0, "", 0
	for k := 1; k < len(path); k++ {
		prefix = join(prefix, keyText(path[k-1]))
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

// consistentPaths reports whether paths can all be set in one nested
// dict: no path runs through another's leaf, and every container is keyed
// by strings only (a dict) or by ints only (a list), as torch's
// dcp_to_torch_save and ckpt's reader rebuild it.
func consistentPaths(paths [][]any) bool {
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

// under reports whether name is one of names, or lies below one ("a.b.c"
// below "a.b").
func under(name string, names map[string]bool) bool {
	if names[name] {
		return true
	}
	for i := range len(name) {
		if name[i] == '.' && names[name[:i]] {
			return true
		}
	}
	return false
}

// nestDCP gives the plan of a DCP output the nesting torch's dcp.save
// would have given the input's object tree: each tensor's planner path,
// and each non-tensor leaf as torch sees it (a tuple or a list of scalars
// is one value, written whole as one BytesStorage item, instead of one
// value per item). Tensors off torch's walk (inside a tuple, or inside an
// object ckpt does not write) and the values beside them keep the flat
// (name,) path. Without a tree (safetensors, GGUF), or when the renamed
// paths contradict each other, the output stays flat.
func (c *config) nestDCP(ck *statedict.Checkpoint, p *plan) error {
	leaves, ok := torchFlatten(ck.Root)
	if !ok {
		return nil
	}
	leafPos := map[string]int{} // source name -> its leaf's place in torch's order
	for i, l := range leaves {
		leafPos[l.name] = i + 1
	}
	// pos: the place of the leaf a source name is, or lies below (a tensor
	// of a tuple kept flat); after every leaf when none.
	pos := func(name string) int {
		if i, ok := leafPos[name]; ok {
			return i
		}
		for i := len(name) - 1; i > 0; i-- {
			if name[i] == '.' {
				if p, ok := leafPos[name[:i]]; ok {
					return p
				}
			}
		}
		return len(leaves) + 1
	}
	tensorPath := map[string][]any{}
	handled := map[string]bool{} // source names of values decided from the tree
	var values []value
	var dropped []Dropped
	vc := &valueCheck{c: c, done: map[any]string{}, busy: map[any]bool{}}
	byName := map[string]*item{}
	for _, it := range p.items {
		byName[it.src.Name] = it
	}
	inValue := map[*item]bool{} // tensors written inside a value
	for _, l := range leaves {
		if _, ok := l.v.(*pickle.Tensor); ok {
			tensorPath[l.name] = l.path
			continue
		}
		if !c.selected(l.name) {
			continue // flat leaves below it that --only names stay as they were
		}
		why := vc.why(l.v, 0)
		var tensors []*item
		v := l.v
		if why == whyTensor {
			if v, tensors = tensorValue(l, byName); v == nil || vc.why(v, 0) != "" {
				continue // its tensors and values stay flat
			}
			why = ""
			for _, it := range tensors {
				inValue[it] = true
			}
		}
		handled[l.name] = true
		if why != "" {
			dropped = append(dropped, Dropped{Name: l.name, Type: pickle.TypeName(l.v), Reason: why})
			continue
		}
		name := c.newName(l.name)
		values = append(values, value{name: name, v: v, src: l.name, path: renamedPath(l.path, l.name, name), pos: leafPos[l.name], tensors: tensors})
	}
	p.items = slices.DeleteFunc(p.items, func(it *item) bool { return inValue[it] })
	for _, v := range p.values {
		if !under(v.src, handled) {
			v.pos = pos(v.src)
			values = append(values, v)
		}
	}
	for _, d := range p.dropped {
		if d.Type == "tensor" || !under(d.Name, handled) {
			dropped = append(dropped, d)
		}
	}
	names := map[string]string{} // output name -> source name
	var paths [][]any
	for _, it := range p.items {
		it.pos = pos(it.src.Name)
		names[it.name] = it.src.Name
		if path, ok := tensorPath[it.src.Name]; ok {
			it.path = renamedPath(path, it.src.Name, it.name)
		}
		paths = append(paths, orFlat(it.path, it.name))
	}
	for _, v := range values {
		if prev, ok := names[v.name]; ok {
			return &TensorError{Name: v.name, Err: fmt.Errorf("%w: %q and %q both become %q", ErrCollision, prev, v.src, v.name)}
		}
		names[v.name] = v.src
		paths = append(paths, orFlat(v.path, v.name))
	}
	p.values, p.dropped = values, dropped
	if !consistentPaths(paths) {
		for _, it := range p.items {
			it.path = nil
		}
		for i := range p.values {
			p.values[i].path = nil
		}
	}
	return nil
}

func orFlat(path []any, name string) []any {
	if len(path) == 0 {
		return []any{name}
	}
	return path
}
