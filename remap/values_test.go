package remap

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Storage values are placed from their own tags through the rules, and a
// storage a tensor also views is counted once per device.
func TestPlanStorageValues(t *testing.T) {
	shared := st("0", "cuda:0", 24) // t and the value "typed"
	g1 := st("1", "cuda:1", 8)      // a value alone, saved on cuda:1
	empty := st("2", "", 0)         // an empty value, no tag
	tensors := []*statedict.Tensor{tensor("t", shared, 6)}
	vals := []StorageValue{{"typed", shared}, {"g1", g1}, {"empty", empty}, {"again", g1}}

	p, err := NewPlan(tensors, mustParse(t, "cuda:1=cpu"), WithStorageValues(vals...))
	if err != nil {
		t.Fatal(err)
	}
	cpu, gpu0 := Device{Type: "cpu", Index: -1}, Device{Type: "cuda", Index: 0}
	want := []StorageEntry{
		{Name: "typed", Storage: shared, Source: "cuda:0", Target: gpu0, NBytes: 24},
		{Name: "g1", Storage: g1, Source: "cuda:1", Target: cpu, NBytes: 8},
		{Name: "empty", Storage: empty, Source: "cpu", Target: cpu, NBytes: 0},
		{Name: "again", Storage: g1, Source: "cuda:1", Target: cpu, NBytes: 8},
	}
	if !reflect.DeepEqual(p.Storages, want) {
		t.Errorf("storages %+v\nwant %+v", p.Storages, want)
	}
	wantUse := []DeviceUse{{Device: cpu, Bytes: 8, Storages: 2}, {Device: gpu0, Bytes: 24, Tensors: 1, Storages: 1}}
	if got := p.Devices(); !reflect.DeepEqual(got, wantUse) {
		t.Errorf("devices %+v, want %+v", got, wantUse)
	}
	if len(p.Entries) != 1 {
		t.Errorf("entries %+v: storage values must not add tensor entries", p.Entries)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"storage_values":[{"name":"typed","storage":"0","source":"cuda:0","target":"cuda:0","nbytes":24}`,
		`{"device":"cpu","bytes":8,"tensors":0,"storages":2,"storage_values":3}`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON %s lacks %s", b, s)
		}
	}

	// Without the option nothing changes; a value sent nowhere valid fails.
	p, err = NewPlan(tensors, Rules{})
	if err != nil || len(p.Storages) != 0 || len(p.Devices()) != 1 {
		t.Errorf("no values: %+v %v", p, err)
	}
	if _, err := NewPlan(nil, Rules{}, WithStorageValues(StorageValue{Name: "x"})); !errors.Is(err, ErrTensor) {
		t.Errorf("nil storage: %v", err)
	}
	neg := st("9", "cpu", -1)
	if _, err := NewPlan(nil, Rules{}, WithStorageValues(StorageValue{"neg", neg})); !errors.Is(err, ErrTensor) || !strings.Contains(err.Error(), "neg") {
		t.Errorf("negative size: %v", err)
	}
}
