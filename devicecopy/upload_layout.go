package devicecopy

import (
	"fmt"
	"sort"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// arenaAlign is the alignment of every storage inside a device arena, and
// of the digest area at its end (cuMemAlloc itself aligns to 256 bytes).
const arenaAlign = 256

// maxArena bounds one device allocation (64 PiB), far above any GPU, so
// that sizes from a hostile file cannot overflow the arena arithmetic.
const maxArena = 1 << 56

// layout plans the arenas: which storages go where, at which offsets.
func layout(ck *statedict.Checkpoint, plan *remap.Plan) (*DeviceState, error) {
	if len(plan.Entries) != len(ck.Tensors) {
		return nil, fmt.Errorf("%w: %d plan entries for %d tensors", ErrPlanMismatch, len(plan.Entries), len(ck.Tensors))
	}
	if err := checkValues(ck, plan); err != nil {
		return nil, err
	}
	st := &DeviceState{}
	arenas := map[remap.Device]*Arena{}
	for _, u := range plan.Devices() {
		if u.Device.Type == "cuda" {
			a := &Arena{Device: u.Device}
			arenas[u.Device] = a
			st.Arenas = append(st.Arenas, a)
		}
	}
	type key struct {
		s *statedict.Storage
		d remap.Device
	}
	placed := map[key]*DeviceStorage{}
	add := func(s *statedict.Storage, d remap.Device) (*DeviceStorage, error) {
		if s.NBytes < 0 {
			return nil, fmt.Errorf("%w: storage %s has %d bytes", ErrLayout, s.Key, s.NBytes)
		}
		ds := placed[key{s, d}]
		if ds == nil {
			ds = &DeviceStorage{Storage: s, Device: d, arena: arenas[d],
				Swapped: s.BigEndian && s.DType.SwapUnit() > 1}
			placed[key{s, d}] = ds
			st.Storages = append(st.Storages, ds)
		}
		return ds, nil
	}
	for i, t := range ck.Tensors {
		e := plan.Entries[i]
		if e.Name != t.Name {
			return nil, fmt.Errorf("%w: entry %d is %q, tensor %d is %q", ErrPlanMismatch, i, e.Name, i, t.Name)
		}
		if e.Target.Type != "cuda" || t.Storage == nil || t.Meta {
			st.Skipped = append(st.Skipped, t.Name)
			continue
		}
		ds, err := add(t.Storage, e.Target)
		if err != nil {
			return nil, err
		}
		if err := checkView(t); err != nil {
			return nil, err
		}
		ds.Tensors = append(ds.Tensors, t.Name)
		st.Tensors = append(st.Tensors, DeviceTensor{Name: t.Name, Device: e.Target, DType: t.DType,
			Shape: append([]int64(nil), t.Shape...), Strides: append([]int64(nil), t.Strides...),
			Offset: t.Offset, Bytes: t.NBytes(), Storage: ds})
		if q := t.Quant; q != nil {
			for _, qt := range []*statedict.Tensor{q.Scales, q.Zeros} {
				if qt != nil && qt.Storage != nil {
					if _, err := add(qt.Storage, e.Target); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	for _, v := range plan.Storages {
		if v.Target.Type != "cuda" {
			continue
		}
		ds, err := add(v.Storage, v.Target)
		if err != nil {
			return nil, err
		}
		ds.Values = append(ds.Values, v.Name)
		st.Values = append(st.Values, DeviceValue{Name: v.Name, Device: v.Target, Storage: ds})
	}
	// File order: the checkpoint's storage order, then the others by key.
	order := map[*statedict.Storage]int{}
	for i, s := range ck.Storages {
		order[s] = i
	}
	sort.SliceStable(st.Storages, func(i, j int) bool {
		oi, iok := order[st.Storages[i].Storage]
		oj, jok := order[st.Storages[j].Storage]
		if iok != jok {
			return iok
		}
		if iok {
			return oi < oj
		}
		return st.Storages[i].Storage.Key < st.Storages[j].Storage.Key
	})
	for _, ds := range st.Storages {
		a, n := ds.arena, uint64(ds.Storage.NBytes)
		if n > maxArena || a.Size > maxArena-n {
			return nil, fmt.Errorf("%w: storage %s of %d bytes makes %s's allocation larger than %d bytes", ErrLayout,
				ds.Storage.Key, n, a.Device, uint64(maxArena))
		}
		ds.off = a.Size
		ds.firstChunk = a.chunks
		a.Size = alignUp(a.Size + n)
		a.chunks += digest.ChunkCount(ds.Storage.NBytes)
		a.Bytes += ds.Storage.NBytes
		a.Storages++
		st.Bytes += ds.Storage.NBytes
	}
	for _, a := range st.Arenas {
		a.digestOff = a.Size
		a.Size = max(alignUp(a.Size+uint64(a.chunks)*8), arenaAlign)
	}
	return st, nil
}

// checkView refuses a tensor whose elements are not inside its storage.
func checkView(t *statedict.Tensor) error {
	for _, s := range t.Strides {
		if s < 0 {
			return fmt.Errorf("%w: tensor %q has a negative stride", ErrLayout, t.Name)
		}
	}
	begin, end := t.Span()
	es := int64(max(t.DType.Size(), 1))
	if t.NBytes() < 0 || len(t.Strides) != len(t.Shape) || t.Offset < 0 || t.Offset > t.Storage.NBytes/es ||
		begin < 0 || end < begin || end > t.Storage.NBytes {
		return fmt.Errorf("%w: tensor %q spans bytes [%d, %d) of a %d-byte storage", ErrLayout, t.Name, begin, end, t.Storage.NBytes)
	}
	return nil
}

func alignUp(n uint64) uint64 { return (n + arenaAlign - 1) / arenaAlign * arenaAlign }
