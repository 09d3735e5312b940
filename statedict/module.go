package statedict

import (
	"strconv"

	"github.com/ckpt-dev/ckpt/pickle"
)

// moduleState recognises the pickled state of a torch.nn.Module (what
// torch.save(model) writes for the model and every submodule: the
// instance's __dict__ with _parameters, _buffers and _modules) and returns
// it. The class itself is never looked at: any foreign object with that
// state is read as a module, as torch's Module.state_dict would see it.
func moduleState(f *pickle.Foreign) (*pickle.Dict, bool) {
	d, ok := f.State.(*pickle.Dict)
	if !ok {
		return nil, false
	}
	has := 0
	for _, e := range d.Entries {
		switch e.Key {
		case "_parameters", "_buffers", "_modules":
			if _, ok := e.Value.(*pickle.Dict); !ok {
				return nil, false
			}
			has++
		}
	}
	return d, has == 3
}

// walkModule visits a pickled module's tensors under the names
// Module.state_dict() gives them: its parameters, then its persistent
// buffers (those not in _non_persistent_buffers_set), then each submodule's
// under "name.". Entries that are None are skipped, as torch skips them.
// Other attributes of the module (hooks, hyperparameters, plain tensor
// attributes) are part of the foreign object, not of the state dict.
func (b *builder) walkModule(f *pickle.Foreign, state *pickle.Dict, name string) error {
	if b.enter(f) {
		return nil
	}
	defer delete(b.onPath, f)
	get := func(key string) *pickle.Dict {
		v, _ := state.Get(key)
		d, _ := v.(*pickle.Dict)
		return d
	}
	nonPersistent := map[string]bool{}
	if v, ok := state.Get("_non_persistent_buffers_set"); ok {
		if s, ok := v.(*pickle.Set); ok {
			for _, it := range s.Items {
				if k, ok := it.(string); ok {
					nonPersistent[k] = true
				}
			}
		}
	}
	for _, key := range []string{"_parameters", "_buffers"} {
		for _, e := range get(key).Entries {
			k := pickle.KeyName(e.Key)
			if e.Value == nil || key == "_buffers" && nonPersistent[k] {
				continue
			}
			if err := b.walk(e.Value, join(name, k), true); err != nil {
				return err
			}
		}
	}
	if err := b.walkPackedParams(state, name); err != nil {
		return err
	}
	for i, e := range get("_modules").Entries {
		if e.Value == nil {
			continue
		}
		k := pickle.KeyName(e.Key)
		if k == "" {
			k = strconv.Itoa(i)
		}
		sub := join(name, k)
		if f, ok := e.Value.(*pickle.Foreign); ok {
			if st, ok := moduleState(f); ok {
				if err := b.walkModule(f, st, sub); err != nil {
					return err
				}
				continue
			}
			if w, bias, ok := quantizedConv(f); ok {
				if err := b.walkQuantizedConv(f, w, bias, sub); err != nil {
					return err
				}
				continue
			}
		}
		if err := b.walk(e.Value, sub, true); err != nil {
			return err
		}
	}
	return nil
}
