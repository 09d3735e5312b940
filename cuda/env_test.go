package cuda

import (
	"strings"
	"testing"
)

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestEnvironment(t *testing.T) {
	type id struct {
		kind  IDKind
		index int
	}
	for _, c := range []struct {
		name     string
		env      map[string]string
		ids      []id
		invalid  string
		hidden   []string
		hidesAll bool
		order    string
		note     string // a substring one of the notes must contain
	}{
		{name: "unset", env: map[string]string{}, order: OrderFastestFirst},
		{name: "empty hides all", env: map[string]string{EnvVisibleDevices: ""}, invalid: "", hidesAll: true, hidden: []string{}, note: "set but empty"},
		{name: "renumbered", env: map[string]string{EnvVisibleDevices: "2,1"}, ids: []id{{IDIndex, 2}, {IDIndex, 1}}, note: "nvidia-smi"},
		// NVIDIA's own example: devices 0 and 2 visible, 1 hidden.
		{name: "stops at invalid", env: map[string]string{EnvVisibleDevices: "0,2,-1,1"}, ids: []id{{IDIndex, 0}, {IDIndex, 2}},
			invalid: "-1", hidden: []string{"1"}},
		{name: "minus one hides all", env: map[string]string{EnvVisibleDevices: "-1"}, invalid: "-1", hidden: []string{}, hidesAll: true},
		{name: "empty entry", env: map[string]string{EnvVisibleDevices: "0,,1"}, ids: []id{{IDIndex, 0}}, invalid: "", hidden: []string{"1"}, note: "empty entry"},
		{name: "trailing comma", env: map[string]string{EnvVisibleDevices: "3,"}, ids: []id{{IDIndex, 3}}, invalid: "", hidden: []string{}},
		{name: "garbage first", env: map[string]string{EnvVisibleDevices: "gpu0,1"}, invalid: "gpu0", hidden: []string{"1"}, hidesAll: true},
		{name: "strtoul prefix", env: map[string]string{EnvVisibleDevices: "1gpu2, 3"}, ids: []id{{IDIndex, 1}, {IDIndex, 3}}, note: "leading digits"},
		{name: "duplicate", env: map[string]string{EnvVisibleDevices: "0,1,0,2"}, ids: []id{{IDIndex, 0}, {IDIndex, 1}}, invalid: "0", hidden: []string{"2"}, note: "repeats"},
		{name: "full uuid", env: map[string]string{EnvVisibleDevices: "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,1"},
			ids: []id{{IDGPUUUID, 0}, {IDIndex, 1}}},
		{name: "abbreviated uuid", env: map[string]string{EnvVisibleDevices: "GPU-8932f937"}, ids: []id{{IDGPUUUID, 0}}, note: "abbreviated"},
		{name: "bad uuid", env: map[string]string{EnvVisibleDevices: "GPU-xyz,0"}, invalid: "GPU-xyz", hidden: []string{"0"}, hidesAll: true},
		{name: "mig new form", env: map[string]string{EnvVisibleDevices: "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"}, ids: []id{{IDMIG, 0}}},
		{name: "mig old form", env: map[string]string{EnvVisibleDevices: "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/2"}, ids: []id{{IDMIG, 0}}},
		{name: "two migs", env: map[string]string{EnvVisibleDevices: "MIG-aaaa,MIG-bbbb"}, ids: []id{{IDMIG, 0}, {IDMIG, 0}}, note: "single MIG"},
		{name: "pci order", env: map[string]string{EnvDeviceOrder: "PCI_BUS_ID", EnvVisibleDevices: "1"}, ids: []id{{IDIndex, 1}}, order: OrderPCIBusID},
		{name: "bad order", env: map[string]string{EnvDeviceOrder: "SLOWEST_FIRST"}, order: OrderFastestFirst, note: "not a value CUDA documents"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := Environment(lookupFrom(c.env))
			if len(e.IDs) != len(c.ids) {
				t.Fatalf("IDs = %+v, want %d", e.IDs, len(c.ids))
			}
			for i, want := range c.ids {
				got := e.IDs[i]
				if got.Kind != want.kind || got.Ordinal != i || (want.kind == IDIndex && got.Index != want.index) {
					t.Errorf("ID %d = %+v, want %+v", i, got, want)
				}
			}
			_, set := c.env[EnvVisibleDevices]
			if e.VisibleSet != set || e.Invalid != c.invalid || e.HidesAll != c.hidesAll {
				t.Errorf("set=%v invalid=%q hidesAll=%v", e.VisibleSet, e.Invalid, e.HidesAll)
			}
			if strings.Join(e.Hidden, "|") != strings.Join(c.hidden, "|") || (c.hidden == nil) != (e.Hidden == nil) {
				t.Errorf("Hidden = %q, want %q", e.Hidden, c.hidden)
			}
			if c.order != "" && e.Order != c.order {
				t.Errorf("Order = %s", e.Order)
			}
			if c.note != "" && !strings.Contains(strings.Join(e.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", e.Notes, c.note)
			}
			if len(e.Explain()) == 0 {
				t.Error("no explanation")
			}
		})
	}
}

func TestExplain(t *testing.T) {
	got := strings.Join(Environment(lookupFrom(map[string]string{EnvVisibleDevices: "2,GPU-8932f937", EnvDeviceOrder: "PCI_BUS_ID"})).Explain(), "\n")
	for _, want := range []string{"cuda:0 is GPU index 2 (PCI_BUS_ID order)", "cuda:1 is GPU-8932f937", `CUDA_DEVICE_ORDER="PCI_BUS_ID"`} {
		if !strings.Contains(got, want) {
			t.Errorf("Explain lacks %q:\n%s", want, got)
		}
	}
	if got := strings.Join(Environment(lookupFrom(map[string]string{EnvVisibleDevices: ""})).Explain(), "\n"); !strings.Contains(got, "hides every GPU") {
		t.Errorf("empty: %s", got)
	}
}

// FuzzEnvironment: any pair of strings gives a consistent description.
func FuzzEnvironment(f *testing.F) {
	for _, s := range []string{"", "0", "0,2,-1,1", "GPU-8932f937,1", "MIG-GPU-8932f937-d72c/1/2", " 1x,2", "0,0", ",", "99999999999"} {
		f.Add(s, "PCI_BUS_ID")
	}
	f.Fuzz(func(t *testing.T, visible, order string) {
		e := Environment(lookupFrom(map[string]string{EnvVisibleDevices: visible, EnvDeviceOrder: order}))
		entries := strings.Split(visible, ",")
		invalid := 0
		if e.Hidden != nil {
			invalid = 1
		}
		if len(e.IDs)+invalid+len(e.Hidden) != len(entries) {
			t.Fatalf("%q: %d ids + %d invalid + %d hidden != %d entries", visible, len(e.IDs), invalid, len(e.Hidden), len(entries))
		}
		for i, id := range e.IDs {
			if id.Ordinal != i || id.Kind == IDInvalid || id.ID != entries[i] {
				t.Fatalf("%q: bad id %d %+v", visible, i, id)
			}
		}
		if e.HidesAll != (len(e.IDs) == 0) || (e.Order != OrderFastestFirst && e.Order != OrderPCIBusID) {
			t.Fatalf("%q: inconsistent %+v", visible, e)
		}
		e.Explain()
	})
}
