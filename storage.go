package ckpt

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Storage is one storage value of a Model: a storage saved as a value of
// its own (torch.save(t.storage()), a TypedStorage in a dict), which
// torch.load maps through map_location like any storage. It is reached by
// its name in the checkpoint tree ("" for a storage at the root).
type Storage struct {
	Name   string
	Saved  string       // location tag as saved ("cpu" when the file has none)
	Device remap.Device // where it was loaded (its plan target)
	DType  dtype.DType  // uint8 for an untyped storage, as torch.load gives it
	NBytes int64
	// Source is the storage as read from the checkpoint.
	Source *statedict.Storage

	host *devicecopy.HostValue
	dev  *devicecopy.DeviceValue
	m    *Model
}

// OnHost reports whether the storage's bytes are in host memory.
func (s *Storage) OnHost() bool { return s.host != nil }

// DevicePtr returns the storage's first byte in GPU memory, and false when
// it is not on a GPU. The pointer is valid until the Model is closed.
func (s *Storage) DevicePtr() (cuda.DevicePtr, bool) {
	if s.dev == nil || s.m.isClosed() {
		return 0, false
	}
	return s.dev.Ptr(), true
}

// Bytes returns the storage's bytes little-endian, as torch holds them:
// the loaded memory itself for a little-endian file (zero-copy: do not
// modify it), a swapped copy for a big-endian one. A storage not in host
// memory is ErrNotOnHost.
func (s *Storage) Bytes() ([]byte, error) {
	if s.m != nil && s.m.isClosed() {
		return nil, fmt.Errorf("%w (storage value %q)", ErrClosed, s.Name)
	}
	if s.host == nil {
		return nil, fmt.Errorf("%w: storage value %q is on %s", ErrNotOnHost, s.Name, s.Device)
	}
	return s.host.Bytes()
}

// Storage returns the selected storage value with the given name (the
// first, should the tree name one twice).
func (m *Model) Storage(name string) (*Storage, bool) {
	for _, s := range m.Storages {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

// storageValues lists ck's storage values (Objects holding a storage) that
// keep selects.
func storageValues(ck *statedict.Checkpoint, keep func(string) bool) []remap.StorageValue {
	var out []remap.StorageValue
	for _, o := range ck.Objects {
		ref, ok := o.Value.(*pickle.StorageRef)
		if !ok {
			continue
		}
		if s, ok := ref.Ref.(*statedict.Storage); ok && s != nil && (keep == nil || keep(o.Name)) {
			out = append(out, remap.StorageValue{Name: o.Name, Storage: s})
		}
	}
	return out
}

// indexStorages builds Storages from the plan and the loaded data:
// LoadHost and Upload list the values they moved in the plan's order.
func (m *Model) indexStorages() {
	m.Storages = make([]*Storage, 0, len(m.Plan.Storages))
	var nh, nd int
	for _, e := range m.Plan.Storages {
		s := &Storage{Name: e.Name, Saved: e.Source, Device: e.Target, DType: e.Storage.DType, NBytes: e.NBytes,
			Source: e.Storage, m: m}
		switch {
		case e.Target.Type == "cpu" && m.Host != nil && nh < len(m.Host.Values):
			s.host = &m.Host.Values[nh]
			nh++
		case e.Target.Type == "cuda" && m.Device != nil && nd < len(m.Device.Values):
			s.dev = &m.Device.Values[nd]
			nd++
		}
		m.Storages = append(m.Storages, s)
	}
}
