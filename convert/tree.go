package convert

import (
	"fmt"
	"math/big"
	"strconv"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// tree is the object tree a .pth output writes: the source tree with
// every tensor replaced by its converted *torchzip.TensorRef and what
// cannot be written left out.
type tree struct {
	root     any
	storages []*pthStorage // in order of first use
	floats   int           // floats written, dict keys included
	newer    int           // kept values other than floats torch 1.13's weights_only loader cannot read
}

// useTree reports whether .pth output writes the source's object tree:
// when there is one and no option changes the naming.
func (c *config) useTree(ck *statedict.Checkpoint, f Format) bool {
	return outputs[f].keepsTree() && ck.Root != nil && len(c.strip) == 0 && len(c.renames) == 0 &&
		len(c.only) == 0 && c.shard == 0
}

// treeBuilder copies the source tree. Each source container and tensor is
// copied once, so shared and cyclic references stay shared and cyclic and
// the copy is no larger than the source.
type treeBuilder struct {
	c        *config
	p        *plan
	t        *tree
	refs     map[*statedict.Storage]*torchzip.StorageRef
	done     map[any]any             // source container or tensor -> its copy
	why      map[any]string          // source container or tensor -> why it cannot be written ("" if it can)
	busy     map[any]bool            // containers whose writability is being decided
	wholeWhy map[*pickle.Dict]string // attribute dicts: why they cannot be written whole
}

// treePlan returns the plan that writes ck's object tree, or nil when the
// tree cannot stand in for a flat state dict: its root cannot be written,
// it holds no tensor, or a tensor view the flat state dict would carry is
// not in it (tensors inside objects that are left out, such as a whole
// pickled nn.Module).
func treePlan(ck *statedict.Checkpoint, c *config) (*plan, error) {
	p := &plan{aliases: map[string]string{}, cast: castStorages(ck, c.dtype)}
	b := &treeBuilder{c: c, p: p, t: &tree{}, refs: map[*statedict.Storage]*torchzip.StorageRef{},
		done: map[any]any{}, why: map[any]string{}, busy: map[any]bool{}, wholeWhy: map[*pickle.Dict]string{}}
	if b.unwritable(ck.Root, false) != "" {
		return nil, nil
	}
	root, err := b.copy(ck.Root, "")
	if err != nil {
		return nil, err
	}
	b.t.root = root
	p.tree = b.t
	if len(p.items) == 0 && len(b.t.storages) == 0 {
		return nil, nil
	}
	have := map[viewKey]bool{}
	for _, it := range p.items {
		have[keyOf(it.src)] = true
	}
	for _, t := range ck.Tensors {
		if unsupported(t, PyTorch) == "" && !have[keyOf(t)] {
			return nil, nil
		}
	}
	return p, nil
}

// viewKey identifies a tensor view: storage, dtype, offset, shape, strides.
type viewKey struct {
	s      *statedict.Storage
	dtype  dtype.DType
	offset int64
	shape  string
}

func keyOf(t *statedict.Tensor) viewKey {
	return viewKey{t.Storage, t.DType, t.Offset, fmt.Sprint(t.Shape, t.Strides)}
}

// unwritable says why v cannot be written, or "". leafOnly is set for dict
// keys, set items and attribute dicts: places torch never puts tensors, so
// tensors there were never checked against their storage.
func (b *treeBuilder) unwritable(v any, leafOnly bool) string {
	if why, ok := torchzip.ScalarWhy(v, b.c.dropFloats); ok {
		return why
	}
	switch x := v.(type) {
	case *pickle.Dict:
		if x.Class != "" && x.Class != "collections.OrderedDict" {
			return x.Class + " is not written"
		}
		if leafOnly {
			return "dict as a key or set item"
		}
		return "" // its entries are checked one by one
	case *pickle.Tensor:
		if leafOnly {
			return "tensor as a key, set item or attribute"
		}
		return b.memoized(x, func() string { return tensorWhy(x) })
	case *pickle.List:
		if leafOnly {
			return "list as a key or set item"
		}
		return b.memoized(x, func() string { return b.itemsWhy(*x, false) })
	case *pickle.Tuple:
		return b.memoized(x, func() string { return b.itemsWhy(*x, leafOnly) })
	case *pickle.Set:
		switch {
		case x.Frozen:
			return "frozenset: not in torch's weights_only allowlist"
		case b.c.dropFloats:
			return "set: torch 1.13's weights_only loader cannot read it (--drop-floats)"
		case leafOnly:
			return "set as a key or set item"
		}
		return b.memoized(x, func() string { return b.itemsWhy(x.Items, true) })
	case *pickle.Object, *pickle.Foreign:
		return "not a plain value; never executed"
	case *pickle.StorageRef:
		if leafOnly {
			return "storage as a key, set item or attribute"
		}
		if s, ok := x.Ref.(*statedict.Storage); !ok || s == nil || s.DType.Size() <= 0 {
			return "storage without a resolved record"
		}
		return ""
	}
	return fmt.Sprintf("%s values are not kept", pickle.TypeName(v))
}

// memoized caches the verdict on a container or tensor. A container met
// again while it is being decided is part of a cycle: a list or dict can be
// written (through the memo), a tuple or set cannot contain itself.
func (b *treeBuilder) memoized(v any, decide func() string) string {
	if why, ok := b.why[v]; ok {
		return why
	}
	if b.busy[v] {
		if _, ok := v.(*pickle.List); ok {
			return ""
		}
		return "contains itself"
	}
	b.busy[v] = true
	why := decide()
	delete(b.busy, v)
	b.why[v] = why
	return why
}

// itemsWhy: a list, tuple or set is written whole or not at all, since
// leaving out an item would move the others.
func (b *treeBuilder) itemsWhy(items []any, leafOnly bool) string {
	for i, it := range items {
		if why := b.unwritable(it, leafOnly); why != "" {
			return fmt.Sprintf("item %d: %s", i, why)
		}
	}
	return ""
}

// tensorWhy says why a rebuilt tensor cannot be written to a .pth file.
func tensorWhy(pt *pickle.Tensor) string {
	if len(pt.Components) > 0 || pt.Layout != "" && pt.Layout != string(statedict.Strided) {
		return "sparse or nested tensor (" + pt.Layout + ")"
	}
	t, why := sourceTensor(pt, "")
	if why != "" {
		return why
	}
	return unsupported(t, PyTorch)
}

// sourceTensor describes a rebuilt tensor as package statedict does.
func sourceTensor(pt *pickle.Tensor, name string) (*statedict.Tensor, string) {
	dt, ok := dtype.Parse(pt.DType)
	if !ok {
		return nil, "unknown dtype " + pt.DType
	}
	t := &statedict.Tensor{Name: name, DType: dt, Shape: pt.Shape, Strides: pt.Stride, Offset: pt.Offset,
		RequiresGrad: pt.RequiresGrad, Parameter: pt.Parameter, Layout: statedict.Layout(pt.Layout), Subclass: pt.Subclass}
	if pt.Quant != nil {
		t.Quant = &statedict.Quantization{Scheme: pt.Quant.Scheme}
	}
	if pt.Storage != nil {
		t.Storage, _ = pt.Storage.Ref.(*statedict.Storage)
	}
	switch {
	case t.Storage == nil:
		t.Meta = true
	case t.Storage.DType != dt:
		return nil, fmt.Sprintf("%s view of a %s storage", dt, t.Storage.DType)
	case len(t.Shape) != len(t.Strides):
		return nil, "shape and strides differ in length"
	}
	return t, ""
}

// copy returns the output node for a writable source node.
func (b *treeBuilder) copy(v any, name string) (any, error) {
	switch v.(type) {
	case *pickle.Dict, *pickle.List, *pickle.Tuple, *pickle.Set, *pickle.Tensor, *big.Int:
		if out, ok := b.done[v]; ok {
			return out, nil
		}
	}
	switch x := v.(type) {
	case *pickle.Dict:
		out := &pickle.Dict{Class: x.Class}
		b.done[v] = out
		for _, e := range x.Entries {
			n := join(name, pickle.KeyName(e.Key))
			if why := b.unwritable(e.Key, true); why != "" {
				b.p.dropped = append(b.p.dropped, Dropped{Name: n, Type: pickle.TypeName(e.Value), Reason: "key " + why})
				continue
			}
			if why := b.unwritable(e.Value, false); why != "" {
				b.p.dropped = append(b.p.dropped, Dropped{Name: n, Type: pickle.TypeName(e.Value), Reason: why})
				continue
			}
			before := len(b.p.values)
			k, err := b.copy(e.Key, n)
			if err != nil {
				return nil, err
			}
			b.p.values = b.p.values[:before] // keys are not values
			val, err := b.copy(e.Value, n)
			if err != nil {
				return nil, err
			}
			out.Entries = append(out.Entries, pickle.DictEntry{Key: k, Value: val})
		}
		if x.State != nil {
			st, err := b.attributes(x, name)
			if err != nil {
				return nil, err
			}
			out.State = st
		}
		return out, nil
	case *pickle.List:
		out := make(pickle.List, len(*x))
		b.done[v] = &out
		return &out, b.copyItems(out, *x, name)
	case *pickle.Tuple:
		out := make(pickle.Tuple, len(*x))
		b.done[v] = &out
		return &out, b.copyItems(out, *x, name)
	case *pickle.Set:
		out := &pickle.Set{Items: make([]any, len(x.Items))}
		b.done[v] = out
		b.t.newer++
		return out, b.copyItems(out.Items, x.Items, name)
	case *pickle.Tensor:
		ref, err := b.tensor(x, name)
		if err != nil {
			return nil, err
		}
		b.done[v] = ref
		return ref, nil
	case *pickle.StorageRef:
		if out, ok := b.done[v]; ok {
			return out, nil
		}
		s := x.Ref.(*statedict.Storage)
		dtype := s.DType
		if b.p.cast[s] {
			dtype = b.c.dtype
		}
		ref, err := b.storage(s, dtype, name)
		if err != nil {
			return nil, err
		}
		b.done[v] = ref
		return ref, nil
	case *big.Int:
		b.done[v] = x
	case float64:
		b.t.floats++
	case []byte, complex128, pickle.Device:
		b.t.newer++
	}
	b.p.values = append(b.p.values, value{name: name, v: v})
	return v, nil
}

func (b *treeBuilder) copyItems(out, in []any, name string) error {
	for i, it := range in {
		v, err := b.copy(it, join(name, strconv.Itoa(i)))
		if err != nil {
			return err
		}
		out[i] = v
	}
	return nil
}

// attributes returns the copy of an OrderedDict's attribute dict (a state
// dict's _metadata: a dict of dicts of plain values), or nil when it cannot
// be written whole.
func (b *treeBuilder) attributes(d *pickle.Dict, name string) (any, error) {
	st, ok := d.State.(*pickle.Dict)
	why := ""
	switch {
	case d.Class != "collections.OrderedDict":
		why = "attributes of a plain dict"
	case !ok || st.Class != "":
		why = "attributes that are not a dict"
	default:
		for _, e := range st.Entries {
			if _, ok := e.Key.(string); !ok {
				why = "an attribute name that is not a string"
				break
			}
		}
		if why == "" {
			why = b.whole(st)
		}
	}
	if why != "" {
		b.p.dropped = append(b.p.dropped, Dropped{Name: join(name, "[attributes]"), Type: pickle.TypeName(d.State), Reason: why})
		return nil, nil
	}
	before := len(b.p.values)
	out, err := b.copy(st, join(name, "[attributes]"))
	b.p.values = b.p.values[:before] // attributes are not values of the tree
	return out, err
}

// whole says why a dict cannot be written with all its entries (nested
// dicts included, tensors excluded), or "".
func (b *treeBuilder) whole(d *pickle.Dict) string {
	if why, ok := b.wholeWhy[d]; ok {
		return why
	}
	if b.busy[d] {
		return "contains itself"
	}
	b.busy[d] = true
	why := ""
	if d.Class != "" && d.Class != "collections.OrderedDict" || d.State != nil {
		why = "a dict with attributes or of class " + d.Class
	}
	for _, e := range d.Entries {
		if why != "" {
			break
		}
		if why = b.unwritable(e.Key, true); why != "" {
			break
		}
		if sub, ok := e.Value.(*pickle.Dict); ok {
			why = b.whole(sub)
		} else {
			why = b.unwritable(e.Value, true)
		}
	}
	delete(b.busy, d)
	b.wholeWhy[d] = why
	return why
}

// tensor returns the converted tensor for a writable source tensor,
// registering its storage on first use.
func (b *treeBuilder) tensor(pt *pickle.Tensor, name string) (*torchzip.TensorRef, error) {
	t, _ := sourceTensor(pt, name)
	s := t.Storage
	it := &item{name: name, src: t, dtype: t.DType}
	if b.p.cast[s] {
		it.dtype = b.c.dtype
	}
	ref, err := b.storage(s, it.dtype, name)
	if err != nil {
		return nil, err
	}
	b.p.items = append(b.p.items, it)
	return &torchzip.TensorRef{Storage: ref, Offset: t.Offset, Shape: t.Shape, Strides: t.Strides,
		RequiresGrad: t.RequiresGrad, Parameter: t.Parameter}, nil
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// storage returns the output storage of a source storage, registering it
// on first use (by a tensor or as a value of its own).
func (b *treeBuilder) storage(s *statedict.Storage, dtype dtype.DType, name string) (*torchzip.StorageRef, error) {
	if ref, ok := b.refs[s]; ok {
		return ref, nil
	}
	loc, err := b.c.location(s)
	if err != nil {
		return nil, &TensorError{Name: name, Err: err}
	}
	ps := &pthStorage{key: strconv.Itoa(len(b.t.storages)), src: s, dtype: dtype}
	b.t.storages = append(b.t.storages, ps)
	ref := &torchzip.StorageRef{Key: ps.key, DType: ps.dtype, Location: loc, NumEl: s.NBytes / int64(s.DType.Size())}
	b.refs[s] = ref
	return ref, nil
}
