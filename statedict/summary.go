package statedict

import "sort"

// Summary totals a checkpoint's tensors. Bytes count each tensor's logical
// elements; StorageBytes counts each storage once (what a load reads).
type Summary struct {
	Tensors      int
	Storages     int
	Shared       int // storages viewed by more than one tensor
	Elements     int64
	Bytes        int64
	StorageBytes int64
	ByDType      []Group // sorted by bytes, largest first
	ByDevice     []Group
}

// Group totals the tensors of one dtype or one device.
type Group struct {
	Key     string
	Tensors int
	Bytes   int64
}

// Summary computes the totals of the checkpoint.
func (c *Checkpoint) Summary() Summary {
	s := Summary{Tensors: len(c.Tensors), Storages: len(c.Storages), Shared: len(c.SharedStorages())}
	byDT := map[string]*Group{}
	byDev := map[string]*Group{}
	add := func(m map[string]*Group, k string, n int64) {
		g := m[k]
		if g == nil {
			g = &Group{Key: k}
			m[k] = g
		}
		g.Tensors++
		g.Bytes += n
	}
	for _, t := range c.Tensors {
		n := max(t.NBytes(), 0)
		s.Elements += max(t.NumEl(), 0)
		s.Bytes += n
		add(byDT, t.DType.String(), n)
		add(byDev, t.Device, n)
	}
	for _, st := range c.Storages {
		s.StorageBytes += st.NBytes
	}
	s.ByDType, s.ByDevice = sortedGroups(byDT), sortedGroups(byDev)
	return s
}

func sortedGroups(m map[string]*Group) []Group {
	out := make([]Group, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Key < out[j].Key
	})
	return out
}
