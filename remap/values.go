package remap

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/statedict"
)

// StorageValue is a storage saved as a value of its own rather than
// through a tensor (torch.save(t.storage()), a TypedStorage in a dict):
// torch.load maps it through map_location like every storage. The
// checkpoint lists such values in Objects (Value a *pickle.StorageRef
// whose Ref is the *statedict.Storage); ckpt.NewPlan collects them.
type StorageValue struct {
	Name    string             // the value's name in the checkpoint tree ("" at the root)
	Storage *statedict.Storage // the storage, one of the checkpoint's Storages
}

// StorageEntry is one storage value of a plan. Plan.Entries stays one
// entry per tensor; storage values are listed apart, in Plan.Storages.
type StorageEntry struct {
	Name    string             // the value's name
	Storage *statedict.Storage // the storage it holds
	Source  string             // location tag as saved ("cpu" when the file has none)
	Target  Device             // where it goes, resolved as a tensor's target is
	NBytes  int64              // the storage's bytes
}

// WithStorageValues has NewPlan place the storage values vs too (see
// Plan.Storages): each gets its target from its own location tag through
// the rules, as torch.load maps it. A storage that a tensor or another
// value also brings to the same device is counted there once.
func WithStorageValues(vs ...StorageValue) Option {
	return func(c *config) { c.values = append(c.values, vs...) }
}

// placeValues adds the storage values of c to p; count adds a storage to
// a device's totals unless it is counted there already.
func placeValues(p *Plan, rules Rules, c *config, count func(s *statedict.Storage, d Device, name string) (*DeviceUse, error)) error {
	for i, v := range c.values {
		if v.Storage == nil {
			return fmt.Errorf("%w: storage value %d (%q) has no storage", ErrTensor, i, v.Name)
		}
		tag := storageTag(v.Storage)
		d, err := resolveTarget(rules, tag, c)
		if err != nil {
			return fmt.Errorf("%w (storage value %q)", err, v.Name)
		}
		if _, err := count(v.Storage, d, v.Name); err != nil {
			return err
		}
		p.Storages = append(p.Storages, StorageEntry{Name: v.Name, Storage: v.Storage, Source: tag, Target: d, NBytes: v.Storage.NBytes})
	}
	return nil
}
