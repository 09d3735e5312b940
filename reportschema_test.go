package ckpt

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestReportsMatchCLIJSONDoc checks that the library's report types and
// docs/cli-json.md, their schema, agree: every key the types marshal (at
// any depth, every optional field filled) is named in the command's
// section of the document, and every field a table of the section lists
// is marshalled where the table says.
func TestReportsMatchCLIJSONDoc(t *testing.T) {
	doc, err := os.ReadFile("docs/cli-json.md")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := Open(context.Background(), "testdata/fixtures/cuda_tagged.pt")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	plan, err := NewPlan(ck)
	if err != nil {
		t.Fatal(err)
	}
	plan.Strays = append(plan.Strays, remap.Stray{Name: "x"})
	plan.Storages = append(plan.Storages, remap.StorageEntry{Name: "v", Storage: &statedict.Storage{Key: "9"}})
	requests := int64(1)
	st := &statedict.Storage{Key: "0"}
	mm := devicecopy.Mismatch{Kind: devicecopy.MismatchDevice, Chunks: []int64{1}}
	load := &LoadReport{Plan: plan, Requests: &requests,
		Preflight: &devicecopy.PreflightReport{Targets: []devicecopy.TargetCheck{{Name: "GPU", Known: true}}},
		Loaded:    &devicecopy.HostResult{Storages: []*devicecopy.HostStorage{{Storage: st, Tensors: []string{"a"}, Values: []string{"v"}}}, Mismatches: []devicecopy.Mismatch{mm}},
		Uploaded: &devicecopy.DeviceState{Arenas: []*devicecopy.Arena{{}}, Verified: true, Mismatches: []devicecopy.Mismatch{mm},
			Storages: []*devicecopy.DeviceStorage{{Storage: st, Tensors: []string{"a"}, Values: []string{"v"}}}},
	}
	checkSchema(t, "load", section(t, doc, "load"), load, nil)

	rep := Inspect(ck, "f", nil)
	rep.Version, rep.Compression, rep.Shards, rep.Requests = "3", "gzip", []string{"s"}, &requests
	rep.Metadata = map[string]string{"k": "v"}
	rep.GGUF = &gguf.File{KV: []gguf.KV{{Key: "general.name", Type: gguf.TypeString, Value: "m"}}}
	rep.Strays = append(rep.Strays, remap.Stray{Name: "x"})
	rep.Quantization = &statedict.QuantizationInfo{Schemes: []quant.SchemeCount{{}}}
	rep.Objects = append(rep.Objects, InspectObject{Name: "s", Type: "torch.storage.TypedStorage",
		Value: JSONValue(&pickle.StorageRef{Key: "0", DType: "float32", Location: "cpu"})})
	zero := 0.0
	rep.Tensors = append(rep.Tensors, InspectTensor{Meta: true, Subclass: "m.C", Attribute: true, Problem: "p",
		Storage: &InspectStorage{}, Stats: &InspectStats{Min: &zero, Max: &zero, Mean: &zero},
		Quant:  map[string]any{"scheme": "per_tensor_affine", "scale": 1.0, "zero_point": 0, "axis": 0},
		Chunks: []InspectChunk{{}}, GGML: &statedict.GGML{},
		Stored:  &statedict.QuantStored{Companions: []string{"w_scale"}, Consumed: []string{"input_scale"}},
		DTensor: &statedict.DTensor{MeshDimNames: []string{"dp"}, Coordinate: []int64{0}}})
	// Map keys are data, not fields.
	checkSchema(t, "inspect", section(t, doc, "inspect"), rep,
		map[string]bool{"summary.bytes_by_dtype": true, "summary.bytes_by_device": true, "metadata": true})
}

// section returns the text of the document's "## name" section.
func section(t *testing.T, doc []byte, name string) string {
	t.Helper()
	s := string(doc)
	i := strings.Index(s, "\n## "+name+"\n")
	if i < 0 {
		t.Fatalf("docs/cli-json.md has no section %q", name)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	return s
}

var docKey = regexp.MustCompile("[`\"]([a-z_0-9.]+)[`\"]")

// checkSchema compares the keys v marshals with the section's text.
func checkSchema(t *testing.T, cmd, sec string, v any, opaque map[string]bool) {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range docKey.FindAllStringSubmatch(sec, -1) {
		for _, k := range strings.Split(m[1], ".") {
			named[k] = true // `preflight.targets` names both
		}
	}
	paths := map[string]bool{} // "plan.tensors[].name"
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := strings.TrimPrefix(prefix+"."+k, ".")
				paths[p] = true
				if !named[k] {
					t.Errorf("%s --json: the library marshals %s, which docs/cli-json.md (## %s) does not name", cmd, p, cmd)
				}
				if !opaque[p] {
					walk(p, e)
				}
			}
		case []any:
			for _, e := range x {
				walk(prefix+"[]", e)
			}
		}
	}
	walk("", tree)
	// The tables: a table's first column names the fields of the object
	// its label line says ("`plan`:", "A tensor:"; none for the top level).
	label := ""
	inTable := false
	for _, line := range strings.Split(sec, "\n") {
		switch {
		case strings.HasPrefix(line, "|"):
			cells := strings.Split(line, "|")
			if !inTable || strings.HasPrefix(line, "|---") || strings.TrimSpace(cells[1]) == "field" {
				inTable = true
				continue
			}
			for _, m := range docKey.FindAllStringSubmatch(cells[1], -1) {
				p := strings.TrimPrefix(label+"."+m[1], ".")
				if !paths[p] {
					t.Errorf("%s --json: docs/cli-json.md lists %s, which the library does not marshal", cmd, p)
				}
			}
		case strings.HasPrefix(line, "`") && strings.HasSuffix(line, "`:"):
			label, inTable = strings.Trim(line, "`:"), false
		case line == "A tensor:":
			label, inTable = "tensors[]", false
		case strings.TrimSpace(line) != "":
			inTable = false
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s: nothing marshalled", cmd)
	}
	keys := make([]string, 0, len(paths))
	for p := range paths {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	t.Logf("%s: %d keys checked", cmd, len(keys))
}
