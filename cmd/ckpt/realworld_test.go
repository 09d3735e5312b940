package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestInspectDTensorAndAttributes: inspect --json carries a DTensor's
// placement ("dtensor") and a TorchScript attribute's flag ("attribute");
// convert refuses one rank's shard (exit 1, pointing at DCP) and writes a
// TorchScript attribute only with --attributes.
func TestInspectDTensorAndAttributes(t *testing.T) {
	code, out, errs := runCLI(t, "inspect", "--json", fx+"torch2_fsdp2_w2_rank1.pt")
	var rep struct {
		Tensors []struct {
			Name    string `json:"name"`
			Shape   []int64
			DTensor *struct {
				Shape      []int64  `json:"shape"`
				Placements []string `json:"placements"`
				MeshShape  []int64  `json:"mesh_shape"`
				Coordinate []int64  `json:"coordinate"`
			} `json:"dtensor"`
		} `json:"tensors"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Tensors) != 4 {
		t.Fatalf("inspect: %d %q %q", code, out, errs)
	}
	d := rep.Tensors[0].DTensor
	if rep.Tensors[0].Name != "0.weight" || d == nil || d.Placements[0] != "Shard(dim=0)" || d.Shape[0] != 6 ||
		d.MeshShape[0] != 2 || d.Coordinate[0] != 1 {
		t.Errorf("0.weight: %+v %+v", rep.Tensors[0], d)
	}
	dir := t.TempDir()
	code, _, errs = runCLI(t, "convert", fx+"torch2_fsdp2_w2_rank1.pt", filepath.Join(dir, "o.safetensors"))
	if code != exitError || !strings.Contains(errs, "DCP") || strings.Count(errs, "\n") != 1 {
		t.Errorf("convert of a rank's shard: %d %q", code, errs)
	}

	code, out, _ = runCLI(t, "inspect", "--json", fx+"torchscript_attrs.pt")
	if code != exitOK || strings.Count(out, `"attribute": true`) != 4 {
		t.Errorf("torchscript inspect: %d, %d attributes", code, strings.Count(out, `"attribute": true`))
	}
	code, out, _ = runCLI(t, "convert", fx+"torchscript_attrs.pt", filepath.Join(dir, "a.pth"))
	if code != exitOK || !strings.Contains(out, "tensors: 3") || !strings.Contains(out, "--attributes writes it") {
		t.Errorf("convert: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "convert", "--attributes", fx+"torchscript_attrs.pt", filepath.Join(dir, "b.pth"))
	if code != exitOK || !strings.Contains(out, "tensors: 7") {
		t.Errorf("convert --attributes: %d %q", code, out)
	}
}
