package convert

import (
	"fmt"
	"slices"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Nested DCP outputs: nestDCP gives a DCP output the planner paths of
// torch's default save planner, walking the input's tree with dcp.Flatten
// and following renames with dcp.RenamedPath (dcp/write_paths.go); which
// leaves are written whole as values is dcp.ValueCheck's call
// (dcp/write_values.go).

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
	leaves, ok := dcp.Flatten(ck.Root)
	if !ok {
		return nil
	}
	leafPos := map[string]int{} // source name -> its leaf's place in torch's order
	for i, l := range leaves {
		leafPos[l.Name] = i + 1
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
	vc := dcp.NewValueCheck(c.dropFloats)
	byName := map[string]*item{}
	for _, it := range p.items {
		byName[it.src.Name] = it
	}
	spec := func(name string) (dcp.TensorSpec, bool) {
		if it := byName[name]; it != nil {
			return it.spec(), true
		}
		return dcp.TensorSpec{}, false
	}
	inValue := map[*item]bool{} // tensors written inside a value
	for _, l := range leaves {
		if _, ok := l.Value.(*pickle.Tensor); ok {
			tensorPath[l.Name] = l.Path
			continue
		}
		if !c.selected(l.Name) {
			continue // flat leaves below it that --only names stay as they were
		}
		why := vc.Why(l.Value)
		var tensors []*item
		v := l.Value
		if why == dcp.WhyTensor {
			var names []string
			if v, names = dcp.TensorValue(l, spec); v == nil || vc.Why(v) != "" {
				continue // its tensors and values stay flat
			}
			why = ""
			for _, n := range names {
				tensors = append(tensors, byName[n])
				inValue[byName[n]] = true
			}
		}
		handled[l.Name] = true
		if why != "" {
			dropped = append(dropped, Dropped{Name: l.Name, Type: pickle.TypeName(l.Value), Reason: why})
			continue
		}
		name := c.newName(l.Name)
		values = append(values, value{name: name, v: v, src: l.Name, path: dcp.RenamedPath(l.Path, l.Name, name), pos: leafPos[l.Name], tensors: tensors})
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
			it.path = dcp.RenamedPath(path, it.src.Name, it.name)
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
	if !dcp.ConsistentPaths(paths) {
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
