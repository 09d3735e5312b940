package remap

import "encoding/json"

// MarshalJSON writes the plan as `ckpt load --json` prints it
// (docs/cli-json.md, "load", `plan`): `tensors` (each `name`, `source`,
// `target`, `nbytes`), `devices` (each `device`, `bytes`, `tensors`,
// `storages`, cpu first) and `strays`. Empty lists are [], never null.
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
	}
	j := struct {
		Tensors []entry  `json:"tensors"`
		Devices []device `json:"devices"`
		Strays  []Stray  `json:"strays"`
	}{Tensors: []entry{}, Devices: []device{}, Strays: append([]Stray{}, p.Strays...)}
	for _, e := range p.Entries {
		j.Tensors = append(j.Tensors, entry{Name: e.Name, Source: e.Source, Target: e.Target.String(), NBytes: e.NBytes})
	}
	for _, u := range p.devices {
		j.Devices = append(j.Devices, device{Device: u.Device.String(), Bytes: u.Bytes, Tensors: u.Tensors, Storages: u.Storages})
	}
	return json.Marshal(j)
}
