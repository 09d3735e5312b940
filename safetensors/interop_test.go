package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// requirePython skips the test when python3 with numpy is missing, unless
// CKPT_REQUIRE_INTEROP=1, in which case it fails.
func requirePython(t *testing.T) {
	t.Helper()
	testenv.Require(t, "numpy", "json")
}

// pyTensor is what testdata/read_safetensors.py reports for one tensor.
type pyTensor struct {
	DType  string            `json:"dtype"`
	Shape  []int64           `json:"shape"`
	Begin  int64             `json:"begin"`
	End    int64             `json:"end"`
	Values []json.RawMessage `json:"values"`
}

type pyFile struct {
	HeaderLen int64               `json:"header_len"`
	Metadata  map[string]string   `json:"metadata"`
	Tensors   map[string]pyTensor `json:"tensors"`
}

// readWithPython runs the independent reader on path.
func readWithPython(t *testing.T, path string) pyFile {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), filepath.Join("testdata", "read_safetensors.py"), path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python reader rejected %s: %v\n%s", path, err, stderr.Bytes())
	}
	var out pyFile
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("python output: %v", err)
	}
	return out
}

// expectation is a tensor to write, its raw bytes, and the values numpy
// should decode from them, as exact decimal strings (integers) or float64.
type expectation struct {
	tensor WriterTensor
	data   []byte
	ints   []string
	floats []float64 // complex values as re, im pairs
}

func le(width int, vals ...uint64) []byte {
	var b []byte
	for _, v := range vals {
		for i := range width {
			b = append(b, byte(v>>(8*i)))
		}
	}
	return b
}

func interopCases() []expectation {
	f32 := []float32{0, 1.5, -2.25, 3.4028235e38, 1e-45, float32(math.Pi)}
	var f32bits []uint64
	var f32want []float64
	for _, v := range f32 {
		f32bits = append(f32bits, uint64(math.Float32bits(v)))
		f32want = append(f32want, float64(v))
	}
	return []expectation{
		{WriterTensor{"layer.0.weight", "F32", []int64{2, 3}}, le(4, f32bits...), nil, f32want},
		{WriterTensor{"pi", "F64", []int64{}}, le(8, math.Float64bits(math.Pi)), nil, []float64{math.Pi}},
		// IEEE half: 1, -2, 0.5, 65504.
		{WriterTensor{"half", "F16", []int64{4}}, le(2, 0x3C00, 0xC000, 0x3800, 0x7BFF), nil, []float64{1, -2, 0.5, 65504}},
		// bfloat16 is the top half of a float32: 1, -2, 0.5.
		{WriterTensor{"brain", "BF16", []int64{3}}, le(2, 0x3F80, 0xC000, 0x3F00), nil, []float64{1, -2, 0.5}},
		{WriterTensor{"c", "C64", []int64{2}}, le(4, uint64(math.Float32bits(1.5)), uint64(math.Float32bits(-2)), 0, uint64(math.Float32bits(0.25))), nil, []float64{1.5, -2, 0, 0.25}},
		{WriterTensor{"i64", "I64", []int64{2, 1}}, le(8, 1<<64-1, 1<<40), []string{"-1", "1099511627776"}, nil},
		{WriterTensor{"u64", "U64", []int64{1}}, le(8, 1<<63+5), []string{"9223372036854775813"}, nil},
		{WriterTensor{"i32", "I32", []int64{2}}, le(4, 1<<32-7, 123456), []string{"-7", "123456"}, nil},
		{WriterTensor{"u32", "U32", []int64{1}}, le(4, 1<<32-1), []string{"4294967295"}, nil},
		{WriterTensor{"i16", "I16", []int64{2}}, le(2, 1<<16-1, 300), []string{"-1", "300"}, nil},
		{WriterTensor{"u16", "U16", []int64{1}}, le(2, 65535), []string{"65535"}, nil},
		{WriterTensor{"i8", "I8", []int64{2}}, []byte{0x80, 0x7f}, []string{"-128", "127"}, nil},
		{WriterTensor{"u8", "U8", []int64{3}}, []byte{0, 128, 255}, []string{"0", "128", "255"}, nil},
		{WriterTensor{"mask", "BOOL", []int64{3}}, []byte{1, 0, 1}, []string{"1", "0", "1"}, nil},
		{WriterTensor{"fp8", "F8_E4M3", []int64{2}}, []byte{0x38, 0xb8}, []string{"56", "184"}, nil},
		{WriterTensor{"empty", "F32", []int64{3, 0}}, nil, []string{}, nil},
		{WriterTensor{"née ☃ \"q\"", "U8", []int64{1}}, []byte{9}, []string{"9"}, nil},
	}
}

// An independent reader (json + numpy, no safetensors package) must read
// what the writer produces, values included.
func TestInteropPythonReadsWriter(t *testing.T) {
	requirePython(t)
	cases := interopCases()
	var tensors []WriterTensor
	data := map[string][]byte{}
	for _, c := range cases {
		tensors = append(tensors, c.tensor)
		data[c.tensor.Name] = c.data
	}
	meta := map[string]string{"format": "pt", "note": "quote\" back\\slash\nnewline\x01 é ☃ <>&"}
	b := writeAll(t, tensors, meta, data)
	path := filepath.Join(t.TempDir(), "out.safetensors")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	py := readWithPython(t, path)
	if py.HeaderLen != int64(binary.LittleEndian.Uint64(b)) || py.HeaderLen%8 != 0 {
		t.Errorf("python header_len %d", py.HeaderLen)
	}
	if !reflect.DeepEqual(py.Metadata, meta) {
		t.Errorf("python metadata %q, want %q", py.Metadata, meta)
	}
	if len(py.Tensors) != len(cases) {
		t.Fatalf("python saw %d tensors, want %d", len(py.Tensors), len(cases))
	}
	for _, c := range cases {
		pt, ok := py.Tensors[c.tensor.Name]
		if !ok {
			t.Errorf("python lacks %q", c.tensor.Name)
			continue
		}
		if pt.DType != c.tensor.DType || !reflect.DeepEqual(pt.Shape, c.tensor.Shape) {
			t.Errorf("%q: python %s%v, want %s%v", c.tensor.Name, pt.DType, pt.Shape, c.tensor.DType, c.tensor.Shape)
		}
		checkValues(t, c, pt.Values)
	}
}

func checkValues(t *testing.T, c expectation, got []json.RawMessage) {
	t.Helper()
	var flat []string
	for _, v := range got {
		var pair []json.Number
		if c.tensor.DType == "C64" && json.Unmarshal(v, &pair) == nil {
			flat = append(flat, string(pair[0]), string(pair[1]))
			continue
		}
		flat = append(flat, string(v))
	}
	if c.floats != nil {
		if len(flat) != len(c.floats) {
			t.Errorf("%q: python values %v, want %v", c.tensor.Name, flat, c.floats)
			return
		}
		for i, s := range flat {
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f != c.floats[i] {
				t.Errorf("%q[%d]: python %s, want %v", c.tensor.Name, i, s, c.floats[i])
			}
		}
		return
	}
	if !reflect.DeepEqual(flat, c.ints) && !(len(flat) == 0 && len(c.ints) == 0) {
		t.Errorf("%q: python values %v, want %v", c.tensor.Name, flat, c.ints)
	}
}

// The shared fixture, written by real PyTorch/safetensors tooling, must
// parse, and agree with the independent reader on every header field.
func TestFixtureModelSafetensors(t *testing.T) {
	path := filepath.Join("..", "testdata", "fixtures", "model.safetensors")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseBytes(b)
	if err != nil {
		t.Fatalf("Parse(%s): %v", path, err)
	}
	if len(f.Tensors) == 0 {
		t.Fatalf("%s has no tensors", path)
	}
	requirePython(t)
	py := readWithPython(t, path)
	if py.HeaderLen != f.HeaderSize {
		t.Errorf("header length %d, python %d", f.HeaderSize, py.HeaderLen)
	}
	if !reflect.DeepEqual(py.Metadata, f.Metadata) {
		t.Errorf("metadata %q, python %q", f.Metadata, py.Metadata)
	}
	if len(py.Tensors) != len(f.Tensors) {
		t.Errorf("%d tensors, python %d", len(f.Tensors), len(py.Tensors))
	}
	for _, ti := range f.Tensors {
		pt, ok := py.Tensors[ti.Name]
		if !ok {
			t.Errorf("python lacks %q", ti.Name)
			continue
		}
		if pt.DType != ti.DType || !reflect.DeepEqual(pt.Shape, ti.Shape) || pt.Begin != ti.Begin || pt.End != ti.End {
			t.Errorf("%q: %s%v [%d,%d], python %s%v [%d,%d]", ti.Name, ti.DType, ti.Shape, ti.Begin, ti.End, pt.DType, pt.Shape, pt.Begin, pt.End)
		}
	}
}
