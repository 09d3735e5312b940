package statedict_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestTorchScriptAttributes: in a TorchScript archive, the tensors of
// ScriptModule.state_dict() (parameters and buffers, as torch.jit.load
// reports them) are listed without Attribute, and the plain tensor
// attributes (self.table, a List[Tensor], a submodule's tensor) with it,
// each with torch's dtype, shape and values
// (torchscript_attrs.pt.script.json, from gen_torchscript).
func TestTorchScriptAttributes(t *testing.T) {
	path := fixtures + "/torchscript_attrs.pt"
	b, err := os.ReadFile(path + ".script.json")
	if err != nil {
		t.Fatal(err)
	}
	type desc struct {
		DType  string    `json:"dtype"`
		Shape  []int64   `json:"shape"`
		Values []float64 `json:"values"`
	}
	var want struct {
		StateDict  map[string]desc `json:"state_dict"`
		Attributes map[string]desc `json:"attributes"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Tensors) != len(want.StateDict)+len(want.Attributes) {
		t.Errorf("%d tensors, torch has %d in state_dict() and %d attributes", len(ck.Tensors), len(want.StateDict), len(want.Attributes))
	}
	for _, tt := range ck.Tensors {
		w, inSD := want.StateDict[tt.Name]
		if !inSD {
			var ok bool
			if w, ok = want.Attributes[tt.Name]; !ok {
				t.Errorf("%s: neither in state_dict() nor an attribute", tt.Name)
				continue
			}
		}
		if tt.Attribute == inSD {
			t.Errorf("%s: Attribute %v, but in state_dict() is %v", tt.Name, tt.Attribute, inSD)
		}
		if tt.DType.String() != w.DType || !slices.Equal(tt.Shape, w.Shape) {
			t.Errorf("%s: %s %v, torch %s %v", tt.Name, tt.DType, tt.Shape, w.DType, w.Shape)
			continue
		}
		data, err := tt.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range w.Values {
			g := float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
			if tt.DType == dtype.Int64 {
				g = float64(int64(binary.LittleEndian.Uint64(data[8*i:])))
			}
			if g != v {
				t.Errorf("%s[%d] = %v, torch %v", tt.Name, i, g, v)
				break
			}
		}
	}
}
