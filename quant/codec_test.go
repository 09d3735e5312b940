package quant

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// The fixtures under testdata/ come from scripts/gen_quant_fixtures.py
// (torch 2.6, upstream's packing and dequantization re-expressed in
// torch, sources cited there): stored tensors under upstream's names,
// `expected` float32 and `expected_native` in upstream's output dtype.

type fixTensor struct {
	DType dtype.DType
	Shape []int64
	Data  []byte
}

type fixture struct {
	t       *testing.T
	tensors map[string]fixTensor
	meta    map[string]string
}

// loadFixture reads testdata/<name>.safetensors with a minimal reader of
// its own (the quant package does not import the safetensors package).
func loadFixture(t *testing.T, name string) *fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, tensors: map[string]fixTensor{}, meta: map[string]string{}}
	data := b[8+n:]
	for k, raw := range hdr {
		if k == "__metadata__" {
			if err := json.Unmarshal(raw, &f.meta); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var e struct {
			DType   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets [2]int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		d, ok := dtype.FromSafetensors(e.DType)
		if !ok {
			t.Fatalf("%s: dtype %s", k, e.DType)
		}
		f.tensors[k] = fixTensor{d, e.Shape, data[e.Offsets[0]:e.Offsets[1]]}
	}
	return f
}

func (f *fixture) get(name string) fixTensor {
	f.t.Helper()
	x, ok := f.tensors[name]
	if !ok {
		f.t.Fatalf("fixture has no tensor %q", name)
	}
	return x
}

// ct returns the CodecTensor of a stored fixture tensor.
func (f *fixture) ct(name string) CodecTensor {
	x := f.get(name)
	return CodecTensor{Name: name, DType: x.DType, Shape: x.Shape}
}

func (f *fixture) floats(name string) []float32 {
	x := f.get(name)
	out := make([]float32, len(x.Data)/x.DType.Size())
	dtype.DecodeFloat32(x.DType, out, x.Data)
	return out
}

// cases decodes the "cases" metadata: case name -> its parameters.
func (f *fixture) cases() map[string]map[string]any {
	var raw map[string]string
	if err := json.Unmarshal([]byte(f.meta["cases"]), &raw); err != nil {
		f.t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for k, v := range raw {
		var m map[string]any
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			f.t.Fatal(err)
		}
		out[k] = m
	}
	return out
}

// sameBits reports the first index where got and want differ bit for bit
// (any NaN equals any NaN), or -1.
func sameBits(got, want []float32) int {
	if len(got) != len(want) {
		return 0
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
			return i
		}
	}
	return -1
}

// checkExact compares a dequantization with the fixture's `expected`
// (bit for bit) and, when present, `expected_native` (the float32 result
// rounded to upstream's output dtype must equal upstream's output).
func checkExact(t *testing.T, f *fixture, prefix string, got []float32) {
	t.Helper()
	want := f.floats(prefix + "expected")
	if i := sameBits(got, want); i >= 0 {
		t.Fatalf("%sexpected: element %d: got %g (%#x), upstream %g (%#x); %d vs %d elements", prefix, i,
			got[min(i, len(got)-1)], math.Float32bits(got[min(i, len(got)-1)]), want[min(i, len(want)-1)], math.Float32bits(want[min(i, len(want)-1)]), len(got), len(want))
	}
	nat, ok := f.tensors[prefix+"expected_native"]
	if !ok {
		return
	}
	enc := make([]byte, len(got)*nat.DType.Size())
	dtype.EncodeFloat32(nat.DType, enc, got)
	round := make([]float32, len(got))
	dtype.DecodeFloat32(nat.DType, round, enc)
	wantN := f.floats(prefix + "expected_native")
	if i := sameBits(round, wantN); i >= 0 {
		t.Fatalf("%sexpected_native (%s): element %d: ours rounded %g, upstream %g", prefix, nat.DType, i, round[i], wantN[i])
	}
}

// dequantAll runs a DequantRows over all rows in uneven chunks (so that
// row ranges are exercised), returning the whole weight.
func dequantAll(t *testing.T, rows, cols int, fn func(dst []float32, r0, r1 int) error) []float32 {
	t.Helper()
	out := make([]float32, rows*cols)
	for r0 := 0; r0 < rows; {
		r1 := min(rows, r0+1+r0%3)
		if err := fn(out[r0*cols:r1*cols], r0, r1); err != nil {
			t.Fatal(err)
		}
		r0 = r1
	}
	return out
}

// fuzzShape turns fuzz bytes into a small shape (dims 0..40, rank 0..4).
func fuzzShape(b []byte) []int64 {
	var s []int64
	for i := 0; i < len(b) && i < 4; i++ {
		s = append(s, int64(b[i]%41))
	}
	return s
}

// benchRows times a DequantRows over a whole weight in 64-row chunks;
// MB/s counts the stored bytes read.
func benchRows(b *testing.B, rows, cols, stored int, fn func(dst []float32, r0, r1 int) error) {
	const chunk = 64
	dst := make([]float32, chunk*cols)
	b.SetBytes(int64(stored))
	for b.Loop() {
		for r0 := 0; r0 < rows; r0 += chunk {
			r1 := min(rows, r0+chunk)
			if err := fn(dst[:(r1-r0)*cols], r0, r1); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// fuzzFill returns n bytes repeating data (zeros when data is empty).
func fuzzFill(data []byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if len(data) > 0 {
			b[i] = data[i%len(data)]
		}
	}
	return b
}
