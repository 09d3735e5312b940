package convert

import (
	"fmt"
	"strconv"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// The values of a nested DCP output (nestDCP): which leaves torch's
// planner saves whole can be written as one value item, and the copy of a
// leaf that holds tensors.

// whyTensor is valueCheck's verdict on a leaf holding a tensor or storage.
const whyTensor = "holds a tensor"

// valueCheck decides whether a leaf can be written as one DCP value (the
// torch.save of it, which torch.load(weights_only=True) reads back).
type valueCheck struct {
	c    *config
	done map[any]string // decided containers
	busy map[any]bool   // containers being decided
}

func (vc *valueCheck) why(v any, depth int) string {
	if depth > 1000 {
		return "nested deeper than 1000"
	}
	if why, ok := scalarWhy(v, vc.c.dropFloats); ok {
		return why
	}
	switch x := v.(type) {
	case *torchzip.TensorRef: // a tensor of tensorValue's copy
		return ""
	case *pickle.Tensor, *pickle.StorageRef:
		return whyTensor
	case *pickle.Object, *pickle.Foreign:
		return "not a plain value; never executed"
	case *pickle.Dict, *pickle.List, *pickle.Tuple, *pickle.Set:
		if why, ok := vc.done[x]; ok {
			return why
		}
		if vc.busy[x] {
			switch x.(type) {
			case *pickle.Dict, *pickle.List:
				return "" // pickle's memo writes the cycle
			}
			return "contains itself"
		}
		vc.busy[x] = true
		why := vc.container(x, depth)
		delete(vc.busy, x)
		vc.done[x] = why
		return why
	}
	return fmt.Sprintf("%s values are not kept", pickle.TypeName(v))
}

func (vc *valueCheck) container(v any, depth int) string {
	var items []any
	switch x := v.(type) {
	case *pickle.Dict:
		if x.Class != "" && x.Class != "collections.OrderedDict" {
			return x.Class + " is not written"
		}
		if x.State != nil {
			items = append(items, x.State)
		}
		for _, e := range x.Entries {
			items = append(items, e.Key, e.Value)
		}
	case *pickle.List:
		items = *x
	case *pickle.Tuple:
		items = *x
	case *pickle.Set:
		if x.Frozen {
			return "frozenset: not in torch's weights_only allowlist"
		}
		if vc.c.dropFloats {
			return "set: torch 1.13's weights_only loader cannot read it (--drop-floats)"
		}
		items = x.Items
	}
	worst := ""
	for _, it := range items {
		switch why := vc.why(it, depth+1); why {
		case "":
		case whyTensor:
			return why // a tensor inside wins: the leaf stays flat
		default:
			if worst == "" {
				worst = why
			}
		}
	}
	return worst
}

// tensorValue returns the copy of a leaf holding tensors that torch saves
// whole (a tuple of tensors): each tensor, found among the plan's items by
// the name ckpt gives it, becomes a contiguous torchzip.TensorRef over a
// storage of its own, keyed by its index in tensors. nil when a tensor is
// not written (left out, or a storage saved as a value), or the leaf holds
// an object ckpt does not write.
func tensorValue(l dcp.Leaf, byName map[string]*item) (any, []*item) {
	var tensors []*item
	var cp func(v any, name string, depth int) (any, bool)
	seq := func(items []any, name string, depth int) ([]any, bool) {
		out := make([]any, len(items))
		for i, x := range items {
			var ok bool
			if out[i], ok = cp(x, join(name, strconv.Itoa(i)), depth+1); !ok {
				return nil, false
			}
		}
		return out, true
	}
	cp = func(v any, name string, depth int) (any, bool) {
		if depth > 1000 {
			return nil, false
		}
		switch x := v.(type) {
		case *pickle.Tensor:
			it := byName[name]
			if it == nil {
				return nil, false
			}
			spec := dcp.TensorSpec{DType: it.dtype, Shape: it.src.Shape, RequiresGrad: it.src.RequiresGrad}
			tensors = append(tensors, it)
			return spec.Ref(strconv.Itoa(len(tensors) - 1)), true
		case *pickle.StorageRef, *pickle.Object, *pickle.Foreign, *pickle.Set:
			return nil, false
		case *pickle.List:
			items, ok := seq(*x, name, depth)
			l := pickle.List(items)
			return &l, ok
		case *pickle.Tuple:
			items, ok := seq(*x, name, depth)
			t := pickle.Tuple(items)
			return &t, ok
		case *pickle.Dict:
			if x.State != nil {
				return nil, false
			}
			out := &pickle.Dict{Class: x.Class}
			for _, e := range x.Entries {
				val, ok := cp(e.Value, join(name, pickle.KeyName(e.Key)), depth+1)
				if !ok {
					return nil, false
				}
				out.Entries = append(out.Entries, pickle.DictEntry{Key: e.Key, Value: val})
			}
			return out, true
		}
		return v, true
	}
	out, ok := cp(l.Value, l.Name, 0)
	if !ok || len(tensors) == 0 {
		return nil, nil
	}
	return out, tensors
}
