package dcp

import (
	"fmt"
	"strconv"

	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// The values of a nested DCP save: which leaves torch's default planner
// saves whole (Flatten's leaves that are not tensors) can be written as
// one value item, the torch.save of the leaf that
// torch.load(weights_only=True) reads back; and the copy of a leaf that
// holds tensors (a tuple of tensors), written with WriteValueTensors.

// WhyTensor is ValueCheck.Why's verdict on a leaf holding a tensor or a
// storage of the input: it is not a plain value (TensorValue may copy it).
const WhyTensor = "holds a tensor"

// ValueCheck decides whether leaves can be written as DCP values. Its
// verdicts on shared containers are kept, so one ValueCheck judges the
// leaves of one tree.
type ValueCheck struct {
	dropFloats bool
	done       map[any]string // decided containers
	busy       map[any]bool   // containers being decided
}

// NewValueCheck returns a ValueCheck; with dropFloats, the leaves torch
// 1.13's weights_only loader cannot read are refused (torchzip.ScalarWhy).
func NewValueCheck(dropFloats bool) *ValueCheck {
	return &ValueCheck{dropFloats: dropFloats, done: map[any]string{}, busy: map[any]bool{}}
}

// Why says why v cannot be written as one value item (WhyTensor when it
// holds a tensor or storage of the input), "" when it can. A
// *torchzip.TensorRef (of TensorValue's copy) is writable.
func (vc *ValueCheck) Why(v any) string { return vc.why(v, 0) }

func (vc *ValueCheck) why(v any, depth int) string {
	if depth > 1000 {
		return "nested deeper than 1000"
	}
	if why, ok := torchzip.ScalarWhy(v, vc.dropFloats); ok {
		return why
	}
	switch x := v.(type) {
	case *torchzip.TensorRef: // a tensor of TensorValue's copy
		return ""
	case *pickle.Tensor, *pickle.StorageRef:
		return WhyTensor
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

func (vc *ValueCheck) container(v any, depth int) string {
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
		if vc.dropFloats {
			return "set: torch 1.13's weights_only loader cannot read it (--drop-floats)"
		}
		items = x.Items
	}
	worst := ""
	for _, it := range items {
		switch why := vc.why(it, depth+1); why {
		case "":
		case WhyTensor:
			return why // a tensor inside wins: the leaf stays flat
		default:
			if worst == "" {
				worst = why
			}
		}
	}
	return worst
}

// TensorValue returns the copy of leaf l holding tensors that torch saves
// whole (a tuple of tensors), and the names of the tensors it holds, in
// order: each tensor, named as Flatten names leaves (the leaf's name and
// the keys and indices below it, joined with dots), becomes spec(name)'s
// contiguous Ref keyed by its index, over a storage of its own. nil when
// spec knows no tensor of that name (it is not written), or the leaf
// holds a storage, an object or a set.
func TensorValue(l Leaf, spec func(name string) (TensorSpec, bool)) (any, []string) {
	var names []string
	var cp func(v any, name string, depth int) (any, bool)
	seq := func(items []any, name string, depth int) ([]any, bool) {
		out := make([]any, len(items))
		for i, x := range items {
			var ok bool
			if out[i], ok = cp(x, joinKey(name, strconv.Itoa(i)), depth+1); !ok {
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
			s, ok := spec(name)
			if !ok {
				return nil, false
			}
			names = append(names, name)
			return s.Ref(strconv.Itoa(len(names) - 1)), true
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
				val, ok := cp(e.Value, joinKey(name, pickle.KeyName(e.Key)), depth+1)
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
	if !ok || len(names) == 0 {
		return nil, nil
	}
	return out, names
}
