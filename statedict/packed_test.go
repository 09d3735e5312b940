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

// TestQuantizedStaticModel: a whole static-quantized model (torch 1.13,
// conv + linear) lists the conv's weight and bias, pickled in its
// __getstate__ tuple, and the Linear's packed params, by the names the saved
// model's state_dict() gives them, with its dtypes, shapes and values
// (quant_static_model.pt.state_dict.json, written by gen_quantized_models:
// torch.load of this file gives a model whose state_dict() raises). The
// scale and zero_point state_dict() makes from the quantized modules'
// Python numbers are not tensors in the file.
func TestQuantizedStaticModel(t *testing.T) {
	path := fixtures + "/quant_static_model.pt"
	b, err := os.ReadFile(path + ".state_dict.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		DType  string    `json:"dtype"`
		Shape  []int64   `json:"shape"`
		Values []float64 `json:"values"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	notInFile := []string{"conv1.scale", "conv1.zero_point", "fc.scale", "fc.zero_point"}
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	got := map[string]bool{}
	for _, tt := range ck.Tensors {
		got[tt.Name] = true
		w, ok := want[tt.Name]
		if !ok {
			t.Errorf("%s: not in the model's state_dict()", tt.Name)
			continue
		}
		if tt.DType.String() != w.DType || !slices.Equal(tt.Shape, w.Shape) {
			t.Errorf("%s: %s %v, state_dict() has %s %v", tt.Name, tt.DType, tt.Shape, w.DType, w.Shape)
			continue
		}
		data, err := tt.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", tt.Name, err)
		}
		for i, v := range w.Values {
			var g float64
			switch tt.DType {
			case dtype.QInt8:
				g = float64(int8(data[i]))
			case dtype.Float32:
				g = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
			case dtype.Int64:
				g = float64(int64(binary.LittleEndian.Uint64(data[8*i:])))
			default:
				t.Fatalf("%s: dtype %s", tt.Name, tt.DType)
			}
			if g != v {
				t.Errorf("%s[%d] = %v, state_dict() has %v", tt.Name, i, g, v)
				break
			}
		}
	}
	for name := range want {
		if !got[name] && !slices.Contains(notInFile, name) {
			t.Errorf("%s: in state_dict() but not listed", name)
		}
	}
	if !got["conv1.weight"] || !got["fc._packed_params._packed_params.0"] {
		t.Errorf("packed weights missing: %v", got)
	}
}
