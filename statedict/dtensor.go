package statedict

import (
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/pickle"
)

// DTensor describes a torch.distributed DTensor (what model.state_dict()
// returns after FSDP2's fully_shard, or under tensor parallelism) saved
// with torch.save: each rank's file holds its local shard. The Tensor
// carrying it is the local shard (its dtype, shape, strides and storage);
// DTensor says where that shard sits in the global tensor. Its JSON form is
// the "dtensor" field of `ckpt inspect --json` (docs/cli-json.md).
type DTensor struct {
	// Shape and Strides are the global tensor's, as DTensor.shape reports.
	Shape   []int64 `json:"shape"`
	Strides []int64 `json:"strides"`
	// Placements has one entry per mesh dimension, spelled as torch prints
	// them: "Shard(dim=0)", "Replicate()", "Partial(sum)",
	// "_StridedShard(dim=0, sf=2)".
	Placements []string `json:"placements"`
	// MeshShape is the device mesh's size per dimension (its rank count
	// in all); MeshDimNames its dimension names, when it has them.
	MeshShape    []int64  `json:"mesh_shape"`
	MeshDimNames []string `json:"mesh_dim_names,omitempty"`
	DeviceType   string   `json:"device_type"`
	// Coordinate is the saving rank's index along each mesh dimension,
	// when the mesh recorded it.
	Coordinate []int64 `json:"coordinate,omitempty"`
}

// Whole reports whether a local shard of shape local is the whole global
// tensor (every placement Replicate, or sharded over a mesh dimension of
// size 1): only then is the file's tensor the tensor torch would assemble.
func (d *DTensor) Whole(local []int64) bool {
	if len(local) != len(d.Shape) {
		return false
	}
	for i := range local {
		if local[i] != d.Shape[i] {
			return false
		}
	}
	for _, p := range d.Placements {
		if strings.HasPrefix(p, "Partial") {
			return false // each rank holds an addend, not the value
		}
	}
	return true
}

// String describes the placement for messages: "Shard(dim=0) over mesh [2]".
func (d *DTensor) String() string {
	return fmt.Sprintf("%s of %v over a %s mesh %v", strings.Join(d.Placements, ", "), d.Shape, d.DeviceType, d.MeshShape)
}

// dtensorClasses are the module.name spellings of DTensor (torch >= 2.5,
// and torch.distributed._tensor before).
var dtensorClasses = map[string]bool{
	"torch.distributed.tensor.DTensor":      true,
	"torch.distributed.tensor._api.DTensor": true,
	"torch.distributed._tensor.DTensor":     true,
	"torch.distributed._tensor.api.DTensor": true,
}

// dtensorOf recognises a DTensor as torch pickles it: a wrapper subclass
// shell (global dtype, size and stride) whose slots state holds
// _local_tensor and _spec (a DTensorSpec: mesh, placements, tensor_meta).
// It returns the local shard and the DTensor, or ok false when pt is not
// one (or not in a shape this reader knows: it is then listed as before).
func dtensorOf(pt *pickle.Tensor) (*pickle.Tensor, *DTensor, bool) {
	if !dtensorClasses[pt.Subclass] {
		return nil, nil, false
	}
	slots := pt.Attributes
	if tup, ok := slots.(*pickle.Tuple); ok && len(*tup) == 2 {
		slots = (*tup)[1] // (dict state, slots state)
	}
	st, ok := slots.(*pickle.Dict)
	if !ok {
		return nil, nil, false
	}
	lv, _ := st.Get("_local_tensor")
	local, ok := lv.(*pickle.Tensor)
	if !ok {
		return nil, nil, false
	}
	sv, _ := st.Get("_spec")
	spec := stateDict(sv)
	if spec == nil {
		return nil, nil, false
	}
	d := &DTensor{Shape: pt.Shape, Strides: pt.Stride}
	mv, _ := spec.Get("mesh")
	mesh := stateDict(mv)
	if mesh == nil {
		return nil, nil, false
	}
	if mt, ok := get(mesh, "mesh").(*pickle.Tensor); ok {
		d.MeshShape = mt.Shape
	}
	d.DeviceType, _ = get(mesh, "device_type").(string)
	if names, ok := get(mesh, "mesh_dim_names").(*pickle.Tuple); ok {
		for _, n := range *names {
			s, _ := n.(string)
			d.MeshDimNames = append(d.MeshDimNames, s)
		}
	}
	if coord, ok := get(mesh, "_coordinate_on_dim").(*pickle.List); ok {
		for _, c := range *coord {
			if i, ok := c.(int64); ok {
				d.Coordinate = append(d.Coordinate, i)
			}
		}
	}
	pl, ok := get(spec, "placements").(*pickle.Tuple)
	if !ok {
		return nil, nil, false
	}
	for _, p := range *pl {
		s, ok := placementName(p)
		if !ok {
			return nil, nil, false
		}
		d.Placements = append(d.Placements, s)
	}
	if len(d.Placements) != len(d.MeshShape) {
		return nil, nil, false
	}
	return local, d, true
}

// placementName spells a Shard, _StridedShard, Replicate or Partial
// placement object as torch prints it.
func placementName(p any) (string, bool) {
	f, ok := p.(*pickle.Foreign)
	if !ok || !strings.HasPrefix(f.Module, "torch.distributed") {
		return "", false
	}
	st := stateDict(p)
	switch f.Name {
	case "Replicate":
		return "Replicate()", true
	case "Shard":
		if dim, ok := get(st, "dim").(int64); ok {
			return fmt.Sprintf("Shard(dim=%d)", dim), true
		}
	case "_StridedShard":
		dim, ok1 := get(st, "dim").(int64)
		sf, ok2 := get(st, "split_factor").(int64)
		if ok1 && ok2 {
			return fmt.Sprintf("_StridedShard(dim=%d, sf=%d)", dim, sf), true
		}
	case "Partial", "_Partial", "_NormPartial":
		op, _ := get(st, "reduce_op").(string)
		return "Partial(" + op + ")", true
	}
	return "", false
}

// stateDict is the BUILD state of a foreign object when it is a dict
// (dataclasses and slotted classes pickle as (None, {slots})).
func stateDict(v any) *pickle.Dict {
	f, ok := v.(*pickle.Foreign)
	if !ok {
		return nil
	}
	st := f.State
	if tup, ok := st.(*pickle.Tuple); ok && len(*tup) == 2 {
		if d, ok := (*tup)[0].(*pickle.Dict); ok && len(d.Entries) > 0 {
			st = d
		} else {
			st = (*tup)[1]
		}
	}
	d, _ := st.(*pickle.Dict)
	return d
}

func get(d *pickle.Dict, key string) any {
	if d == nil {
		return nil
	}
	v, _ := d.Get(key)
	return v
}

// addDTensor lists a DTensor as one tensor under its own name: the local
// shard's data with the DTensor's placement (Tensor.DTensor), instead of a
// storage-less shell and its internal attributes.
func (b *builder) addDTensor(pt, local *pickle.Tensor, d *DTensor, name string) error {
	t, err := b.makeTensor(local, name)
	if err != nil {
		return err
	}
	t.Subclass = pt.Subclass
	t.DTensor = d
	t.RequiresGrad = pt.RequiresGrad
	t.Parameter = pt.Parameter || local.Parameter
	b.ck.Tensors = append(b.ck.Tensors, t)
	b.addStorage(t.Storage)
	return nil
}
