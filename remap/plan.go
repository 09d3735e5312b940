package remap

import (
	"fmt"
	"math"
	"sort"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Entry is one tensor of a plan.
type Entry struct {
	Name   string // the tensor's name
	Source string // location tag as saved ("cpu" when the file has none)
	Target Device // where it goes; bare accelerator types resolved to an index
	NBytes int64  // bytes of the tensor's own elements (a view counts its view)
}

// DeviceUse totals what a plan puts on one device.
type DeviceUse struct {
	Device   Device
	Bytes    int64 // sum of NBytes of the distinct storages going there
	Tensors  int   // tensors going there
	Storages int   // distinct storages going there
}

// Plan says where every tensor of a checkpoint goes under some Rules,
// before any byte is read.
type Plan struct {
	Entries []Entry // one per tensor, in the order given to NewPlan
	// Storages has one entry per storage value (WithStorageValues), in the
	// order given; empty without them.
	Storages []StorageEntry
	Strays   []Stray // DetectStrays of the same tensors (saved tags, not targets)
	devices  []DeviceUse
}

// Devices returns the totals per target device: cpu first, then by type
// name, then by index. The slice is the caller's.
func (p *Plan) Devices() []DeviceUse {
	return append([]DeviceUse(nil), p.devices...)
}

// NewPlan applies rules to every tensor's saved location tag (the tag of
// its storage, as torch.load does). A target without an index on a type
// with several devices ("cuda", "xpu") is resolved to the current device
// of that type: index 0 unless WithCurrentDevice says otherwise; "cpu:0",
// "mps:0" and "meta:0" count as "cpu", "mps" and "meta". A storage that
// several tensors share is counted once per target device, as are the
// per-channel scale and zero-point storages of quantized tensors. Honours
// WithCurrentDevice.
//
// With WithStorageValues the storage values are placed too (Storages),
// each from its own location tag, and counted in Devices with the tensors'
// storages: a storage a tensor also views is counted once per device.
//
// NewPlan fails (ErrTensor) on a nil tensor or a negative or overflowing
// size, and on a target that is not a device (see Rules.Target).
func NewPlan(tensors []*statedict.Tensor, rules Rules, opts ...Option) (*Plan, error) {
	c := newConfig(opts)
	p := &Plan{Entries: make([]Entry, 0, len(tensors))}
	type placed struct {
		s *statedict.Storage
		d Device
	}
	seen := map[placed]bool{}
	use := map[Device]*DeviceUse{}
	add := func(d Device) *DeviceUse {
		u := use[d]
		if u == nil {
			u = &DeviceUse{Device: d}
			use[d] = u
		}
		return u
	}
	count := func(s *statedict.Storage, d Device, who string) (*DeviceUse, error) {
		u := add(d)
		if seen[placed{s, d}] {
			return u, nil
		}
		seen[placed{s, d}] = true
		if s.NBytes < 0 || u.Bytes > math.MaxInt64-s.NBytes {
			return nil, fmt.Errorf("%w: %q: storage size %d negative or total overflows", ErrTensor, who, s.NBytes)
		}
		u.Bytes += s.NBytes
		u.Storages++
		return u, nil
	}
	for i, t := range tensors {
		if t == nil {
			return nil, fmt.Errorf("%w: tensor %d is nil", ErrTensor, i)
		}
		n := t.NBytes()
		if n < 0 {
			return nil, fmt.Errorf("%w: %q: size overflows", ErrTensor, t.Name)
		}
		tag := sourceTag(t)
		d, err := resolveTarget(rules, tag, c)
		if err != nil {
			return nil, fmt.Errorf("%w (tensor %q)", err, t.Name)
		}
		p.Entries = append(p.Entries, Entry{Name: t.Name, Source: tag, Target: d, NBytes: n})
		add(d).Tensors++
		for _, s := range storagesOf(t) {
			sd := d
			if s != t.Storage {
				if sd, err = resolveTarget(rules, storageTag(s), c); err != nil {
					return nil, fmt.Errorf("%w (tensor %q)", err, t.Name)
				}
			}
			if _, err := count(s, sd, t.Name); err != nil {
				return nil, err
			}
		}
	}
	if err := placeValues(p, rules, c, count); err != nil {
		return nil, err
	}
	for _, u := range use {
		p.devices = append(p.devices, *u)
	}
	sort.Slice(p.devices, func(i, j int) bool {
		a, b := p.devices[i].Device, p.devices[j].Device
		if (a.Type == "cpu") != (b.Type == "cpu") {
			return a.Type == "cpu"
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Index < b.Index
	})
	p.Strays = DetectStrays(tensors)
	return p, nil
}

// resolveTarget applies rules to tag and resolves bare and single devices.
func resolveTarget(rules Rules, tag string, c *config) (Device, error) {
	d, err := rules.Target(tag)
	if err != nil {
		return Device{}, err
	}
	switch {
	case singleTypes[d.Type]:
		d.Index = -1
	case d.Index < 0:
		d.Index = c.current[d.Type] // 0 when not set
	}
	return d, nil
}

// storagesOf lists the storages a tensor's load brings along.
func storagesOf(t *statedict.Tensor) []*statedict.Storage {
	var ss []*statedict.Storage
	if t.Storage != nil {
		ss = append(ss, t.Storage)
	}
	if q := t.Quant; q != nil {
		for _, qt := range []*statedict.Tensor{q.Scales, q.Zeros} {
			if qt != nil && qt.Storage != nil {
				ss = append(ss, qt.Storage)
			}
		}
	}
	return ss
}

// sourceTag is the location tag torch.load would hand to map_location for
// t: its storage's, else the tensor's, else "cpu" (safetensors has none).
func sourceTag(t *statedict.Tensor) string {
	if t.Storage != nil && t.Storage.Location != "" {
		return t.Storage.Location
	}
	if t.Device != "" {
		return t.Device
	}
	return "cpu"
}

func storageTag(s *statedict.Storage) string {
	if s.Location == "" {
		return "cpu"
	}
	return s.Location
}
