package devicecopy

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// HostValue is a storage value (remap.Plan.Storages) loaded into host
// memory: a storage saved as a value of its own, as torch.load returns it.
type HostValue struct {
	Name    string
	Storage *HostStorage // shared with the tensors viewing the same storage
}

// Bytes returns the storage's bytes little-endian, as torch holds them:
// Data itself for a little-endian file (shared memory: do not modify it),
// a swapped copy for a big-endian one.
func (v HostValue) Bytes() ([]byte, error) {
	hs := v.Storage
	if hs.Data == nil && hs.Storage.NBytes > 0 {
		return nil, fmt.Errorf("%w (storage value %q)", ErrReleased, v.Name)
	}
	if u := hs.Storage.DType.SwapUnit(); hs.Storage.BigEndian && u > 1 {
		out := append([]byte(nil), hs.Data...)
		statedict.SwapBytes(out, u)
		return out, nil
	}
	return hs.Data[:len(hs.Data):len(hs.Data)], nil
}

// Value returns the loaded storage value with the given name.
func (r *HostResult) Value(name string) (HostValue, bool) {
	for _, v := range r.Values {
		if v.Name == name {
			return v, true
		}
	}
	return HostValue{}, false
}

// DeviceValue is a storage value (remap.Plan.Storages) uploaded to a GPU.
type DeviceValue struct {
	Name    string
	Device  remap.Device
	Storage *DeviceStorage // shared with the tensors viewing the same storage there
}

// Ptr returns the storage's first byte on the device (0 before the upload).
func (v DeviceValue) Ptr() cuda.DevicePtr { return v.Storage.Ptr }

// Value returns the uploaded storage value with the given name.
func (s *DeviceState) Value(name string) (DeviceValue, bool) {
	for _, v := range s.Values {
		if v.Name == name {
			return v, true
		}
	}
	return DeviceValue{}, false
}

// checkValues refuses a plan whose storage values are not storages of ck,
// or are negative in size.
func checkValues(ck *statedict.Checkpoint, plan *remap.Plan) error {
	if len(plan.Storages) == 0 {
		return nil
	}
	mine := make(map[*statedict.Storage]bool, len(ck.Storages))
	for _, s := range ck.Storages {
		mine[s] = true
	}
	for _, v := range plan.Storages {
		if !mine[v.Storage] {
			return fmt.Errorf("%w: storage value %q is not a storage of the checkpoint", ErrPlanMismatch, v.Name)
		}
		if v.Storage.NBytes < 0 {
			return fmt.Errorf("%w: storage value %q has %d bytes", ErrLayout, v.Name, v.Storage.NBytes)
		}
	}
	return nil
}

// users names what uses a storage, for messages: its tensors, then its
// storage values.
func users(tensors, values []string) []string {
	out := append([]string(nil), tensors...)
	for _, v := range values {
		out = append(out, fmt.Sprintf("storage value %q", v))
	}
	return out
}
