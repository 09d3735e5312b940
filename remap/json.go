package remap

import "encoding/json"

// MarshalJSON writes the plan as `ckpt load --json` prints it
// (docs/cli-json.md, "load", `plan`): `tensors` (each `name`, `source`,
// `target`, `nbytes`), `devices` (each `device`, `bytes`, `tensors`,
// `storages`, `storage_values`, cpu first), `storage_values` (each
// `name`, `storage`, `source`, `target`, `nbytes`) and `strays`. Empty lists are [], never null.
func (p *Plan) MarshalJSON() ([]byte, error) {
	type entry struct {
		Name   string `json:"name"`
		Source string `json:"source"`
		Target string `json:"target"`
		NBytes int64  `json:"nbytes"`
	}
	type device struct {
		Device   string `json:"device"`
		Bytes    int64  `json:"bytes"`
		Tensors  int    `json:"tensors"`
		Storages int    `json:"storages"`
		Values   int    `json:"storage_values"`
	}
	type value struct {
		Name    string `json:"name"`
		Storage string `json:"storage"`
		Source  string `json:"source"`
		Target  string `json:"target"`
		NBytes  int64  `json:"nbytes"`
	}
	j := struct {
		Tensors []entry  `json:"tensors"`
		Devices []device `json:"devices"`
		Values  []value  `json:"storage_values"`
		Strays  []Stray  `json:"strays"`
	}{Tensors: []entry{}, Devices: []device{}, Values: []value{}, Strays: append([]Stray{}, p.Strays...)}
	values := map[Device]int{}
	for _, v := range p.Storages {
		values[v.Target]++
		j.Values = append(j.Values, value{Name: v.Name, Storage: v.Storage.Key, Source: v.Source, Target: v.Target.String(), NBytes: v.NBytes})
	}
	for _, e := range p.Entries {
		j.Tensors = append(j.Tensors, entry{Name: e.Name, Source: e.Source, Target: e.Target.String(), NBytes: e.NBytes})
	}
	for _, u := range p.devices {
		j.Devices = append(j.Devices, device{Device: u.Device.String(), Bytes: u.Bytes, Tensors: u.Tensors, Storages: u.Storages, Values: values[u.Device]})
	}
	return json.Marshal(j)
}
