package pickle

import (
	"archive/zip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// These tests read pickles written by real torch (1.13) and Python; see
// testdata/gen.py, which also wrote expected.json from torch's own view of
// every tensor.

type zipRecords map[string][]byte

// readTorchZip returns the records of a torch.save zip in testdata keyed by
// their name under the top folder ("data.pkl", "data/0", ...).
func readTorchZip(t *testing.T, name string) zipRecords {
	t.Helper()
	recs, err := readZip(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func readZip(path string) (zipRecords, error) {
	zr, err := zip.OpenReader(path)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	recs := zipRecords{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		_, rest, _ := strings.Cut(f.Name, "/")
		recs[rest] = b
	}
	return recs, nil
}

type expTensor struct {
	DType        string   `json:"dtype"`
	Shape        []int64  `json:"shape"`
	Stride       []int64  `json:"stride"`
	Offset       int64    `json:"offset"`
	Location     string   `json:"location"`
	StorageNumel int64    `json:"storage_numel"`
	StorageGroup *int     `json:"storage_group"`
	RequiresGrad bool     `json:"requires_grad"`
	Parameter    bool     `json:"parameter"`
	Layout       string   `json:"layout"`
	First        *float64 `json:"first"`
	QScheme      string   `json:"qscheme"`
	Scale        float64  `json:"scale"`
	ZeroPoint    int64    `json:"zero_point"`
	Axis         int64    `json:"axis"`
	Device       string   `json:"device"`
}

func loadExpected(t *testing.T) map[string]map[string]expTensor {
	t.Helper()
	b, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]map[string]expTensor
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// flatten collects the tensors of a value tree by dotted path, walking
// Dict, List and Tuple and remembering what it visited.
func flatten(v any) map[string]*Tensor {
	out := map[string]*Tensor{}
	seen := map[any]bool{}
	var walk func(v any, path string)
	join := func(p, k string) string {
		if p == "" {
			return k
		}
		return p + "." + k
	}
	walk = func(v any, path string) {
		switch x := v.(type) {
		case *Tensor:
			out[path] = x
			return
		case *Dict, *List, *Tuple:
			if seen[x] {
				return
			}
			seen[x] = true
		}
		switch x := v.(type) {
		case *Dict:
			for _, e := range x.Entries {
				walk(e.Value, join(path, fmt.Sprint(e.Key)))
			}
		case *List:
			for i, e := range *x {
				walk(e, join(path, fmt.Sprint(i)))
			}
		case *Tuple:
			for i, e := range *x {
				walk(e, join(path, fmt.Sprint(i)))
			}
		}
	}
	walk(v, "")
	return out
}

var elemSize = map[string]int64{"float32": 4, "float64": 8, "int64": 8, "int32": 4, "float16": 2,
	"bfloat16": 2, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16,
	"quint8": 1, "qint8": 1, "qint32": 4}

// firstElement decodes the element at the tensor's offset from its storage record.
func firstElement(t *testing.T, recs zipRecords, tn *Tensor) float64 {
	t.Helper()
	b := recs["data/"+tn.Storage.Key]
	off := tn.Offset * elemSize[tn.DType]
	if off+elemSize[tn.DType] > int64(len(b)) {
		t.Fatalf("offset %d beyond record of %d bytes", off, len(b))
	}
	b = b[off:]
	switch tn.DType {
	case "float32":
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case "float64":
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	case "int64":
		return float64(int64(binary.LittleEndian.Uint64(b)))
	case "int32":
		return float64(int32(binary.LittleEndian.Uint32(b)))
	}
	t.Fatalf("no decoder for %s", tn.DType)
	return 0
}

// checkTensors compares every tensor torch reported with what Unpickle built.
func checkTensors(t *testing.T, got map[string]*Tensor, want map[string]expTensor, recs zipRecords) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d tensors, torch reports %d", len(got), len(want))
	}
	groups := map[int]*StorageRef{}
	for path, w := range want {
		g := got[path]
		if g == nil {
			t.Errorf("%s: missing", path)
			continue
		}
		if g.DType != w.DType || !reflect.DeepEqual(nz(g.Shape), nz(w.Shape)) || g.RequiresGrad != w.RequiresGrad ||
			g.Parameter != w.Parameter || g.Layout != w.Layout {
			t.Errorf("%s: got dtype %s shape %v rg %v param %v layout %s; torch: %s %v %v %v %s", path,
				g.DType, g.Shape, g.RequiresGrad, g.Parameter, g.Layout, w.DType, w.Shape, w.RequiresGrad, w.Parameter, w.Layout)
		}
		if w.Device != "" && g.Device != w.Device {
			t.Errorf("%s: device %q, torch %q", path, g.Device, w.Device)
		}
		if w.StorageGroup == nil {
			continue
		}
		if g.Storage == nil {
			t.Errorf("%s: no storage", path)
			continue
		}
		if !reflect.DeepEqual(nz(g.Stride), nz(w.Stride)) || g.Offset != w.Offset || g.Storage.Location != w.Location ||
			g.Storage.Numel != w.StorageNumel {
			t.Errorf("%s: stride %v offset %d loc %s numel %d; torch %v %d %s %d", path, g.Stride, g.Offset,
				g.Storage.Location, g.Storage.Numel, w.Stride, w.Offset, w.Location, w.StorageNumel)
		}
		if prev, ok := groups[*w.StorageGroup]; ok && prev.Key != g.Storage.Key {
			t.Errorf("%s: storage key %s, but torch shares the storage of key %s", path, g.Storage.Key, prev.Key)
		}
		groups[*w.StorageGroup] = g.Storage
		if recs != nil {
			if n := int64(len(recs["data/"+g.Storage.Key])); n != g.Storage.Numel*elemSize[g.DType] {
				t.Errorf("%s: record data/%s has %d bytes, storage says %d x %d", path, g.Storage.Key, n, g.Storage.Numel, elemSize[g.DType])
			}
			if w.First != nil {
				if f := firstElement(t, recs, g); f != *w.First {
					t.Errorf("%s: first element %v, torch %v", path, f, *w.First)
				}
			}
		}
		if w.QScheme != "" {
			q := g.Quant
			if q == nil || q.Scheme != w.QScheme {
				t.Errorf("%s: quant %+v, torch scheme %s", path, q, w.QScheme)
				continue
			}
			if strings.HasPrefix(w.QScheme, "per_tensor") && (q.Scale != w.Scale || q.ZeroPoint != w.ZeroPoint) {
				t.Errorf("%s: scale %v zp %d, torch %v %d", path, q.Scale, q.ZeroPoint, w.Scale, w.ZeroPoint)
			}
			if strings.HasPrefix(w.QScheme, "per_channel") && (q.Axis != w.Axis || q.Scales == nil || q.ZeroPoints == nil) {
				t.Errorf("%s: per-channel %+v, torch axis %d", path, q, w.Axis)
			}
		}
	}
}

func nz(s []int64) []int64 {
	if s == nil {
		return []int64{}
	}
	return s
}

func TestRealTorchZips(t *testing.T) {
	exp := loadExpected(t)
	for _, name := range []string{"state_dict", "state_dict_p4", "quantized", "sparse", "misc"} {
		t.Run(name, func(t *testing.T) {
			recs := readTorchZip(t, name+".pt")
			v, err := Unpickle(recs["data.pkl"])
			if err != nil {
				t.Fatal(err)
			}
			checkTensors(t, flatten(v), exp[name], recs)
		})
	}
}

func TestRealStateDictShape(t *testing.T) {
	recs := readTorchZip(t, "state_dict.pt")
	v, err := Unpickle(recs["data.pkl"])
	if err != nil {
		t.Fatal(err)
	}
	d, ok := v.(*Dict)
	if !ok || d.Class != "collections.OrderedDict" {
		t.Fatalf("top level is %T %+v", v, v)
	}
	keys := []string{}
	for _, e := range d.Entries {
		keys = append(keys, e.Key.(string))
	}
	if got := strings.Join(keys, ","); !strings.HasPrefix(got, "w,row,col,wt,bias,half") {
		t.Errorf("order of keys %s", got)
	}
	bias, _ := d.Get("bias")
	if b := bias.(*Tensor); !b.Parameter || !b.RequiresGrad || b.Rebuild != "_rebuild_tensor_v2" || b.Storage.Class != "BFloat16Storage" {
		t.Errorf("bias %+v", b)
	}
	w, _ := d.Get("w")
	row, _ := d.Get("row")
	if w.(*Tensor).Storage == row.(*Tensor).Storage {
		t.Errorf("each persistent id yields its own StorageRef, got shared pointer")
	}
	// torch keeps _metadata as the BUILD state of the OrderedDict only for
	// module.state_dict(); a hand-built OrderedDict has none.
	if d.State != nil {
		t.Errorf("state %v", d.State)
	}
}

// The legacy (non-zip) format is several pickles back to back; UnpickleN
// reports where each ends.
func TestRealLegacyStream(t *testing.T) {
	data, err := os.ReadFile("testdata/state_dict_legacy.pt")
	if err != nil {
		t.Fatal(err)
	}
	var vals []any
	off := 0
	for i := 0; i < 5; i++ {
		v, n, err := UnpickleN(data[off:])
		if err != nil {
			t.Fatalf("pickle %d at %d: %v", i, off, err)
		}
		vals = append(vals, v)
		off += n
	}
	magic, ok := vals[0].(*big.Int)
	if !ok || magic.Text(16) != "1950a86a20f9469cfc6c" {
		t.Errorf("magic %v", vals[0])
	}
	if vals[1] != int64(1001) {
		t.Errorf("protocol version %v", vals[1])
	}
	if si, ok := vals[2].(*Dict); !ok {
		t.Errorf("sys_info %T", vals[2])
	} else if le, _ := si.Get("little_endian"); le != true {
		t.Errorf("little_endian %v", le)
	}
	exp := loadExpected(t)["state_dict_legacy"]
	got := flatten(vals[3])
	checkTensors(t, got, exp, nil)
	keys, ok := vals[4].(*List)
	if !ok {
		t.Fatalf("keys %T", vals[4])
	}
	// every storage key the tensors name is in the key list, and legacy
	// 6-tuples parse with their None view metadata.
	have := map[string]bool{}
	for _, k := range *keys {
		have[k.(string)] = true
	}
	for p, tn := range got {
		if !have[tn.Storage.Key] {
			t.Errorf("%s: key %s not in %v", p, tn.Storage.Key, *keys)
		}
	}
	// the element count that follows the pickles is that of the first key
	n := int64(binary.LittleEndian.Uint64(data[off:]))
	first := (*keys)[0].(string)
	for _, tn := range got {
		if tn.Storage.Key == first && tn.Storage.Numel != n {
			t.Errorf("first storage numel %d, stream says %d", tn.Storage.Numel, n)
		}
	}
}

func TestRealMisc(t *testing.T) {
	recs := readTorchZip(t, "misc.pt")
	v, err := Unpickle(recs["data.pkl"])
	if err != nil {
		t.Fatal(err)
	}
	d := v.(*Dict)
	get := func(k string) any {
		x, ok := d.Get(k)
		if !ok {
			t.Fatalf("missing %s", k)
		}
		return x
	}
	big100 := new(big.Int).Lsh(big.NewInt(1), 100)
	neg70 := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 70))
	checks := map[string]any{
		"device": Device("cuda:1"), "device_str": Device("cpu"), "dtype": Global{"torch", "bfloat16"},
		"bytes": []byte{0, 0xff, 'a', 'b'}, "bytearray": []byte("xyz"), "complex": complex(1, 2),
		"big": big100, "neg": neg70, "int64max": int64(math.MaxInt64), "float": 0.1, "none": nil,
		"true": true, "unicode": "héllo ✓", "epoch": int64(7),
		"tuple":  &Tuple{int64(1), "two", 3.0},
		"set":    &Set{Items: []any{int64(1), int64(2), int64(3)}},
		"frozen": &Set{Items: []any{"a"}, Frozen: true},
	}
	for k, want := range checks {
		if got := get(k); !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	ns, ok := get("args").(*Object)
	if !ok || ns.Module != "argparse" || ns.Name != "Namespace" {
		t.Fatalf("args %#v", get("args"))
	}
	st := ns.State.(*Dict)
	if lr, _ := st.Get("lr"); lr != 0.1 {
		t.Errorf("Namespace lr %v", lr)
	}
	arr, ok := get("np_array").(*Object)
	if !ok || arr.Name != "_reconstruct" || !strings.HasPrefix(arr.Module, "numpy") {
		t.Fatalf("np_array %#v", get("np_array"))
	}
	// numpy's ndarray state: (version, shape, dtype, is_fortran, data)
	ast := *arr.State.(*Tuple)
	if !reflect.DeepEqual(ast[1], &Tuple{int64(2), int64(3)}) || len(ast[4].([]byte)) != 24 {
		t.Errorf("ndarray state %#v", ast)
	}
	if c := get("counter").(*Dict); c.Class != "collections.Counter" || len(c.Entries) != 1 {
		t.Errorf("counter %#v", c)
	}
	dd := get("defaultdict").(*Dict)
	if v, _ := dd.Get("k"); dd.Class != "collections.defaultdict" || !reflect.DeepEqual(v, &List{int64(1)}) {
		t.Errorf("defaultdict %#v", dd)
	}
	if s, ok := get("np_scalar").(*Object); !ok || s.Name != "scalar" {
		t.Errorf("np_scalar %#v", get("np_scalar"))
	}
}

func TestRealModule(t *testing.T) {
	recs := readTorchZip(t, "model.pt")
	v, err := Unpickle(recs["data.pkl"])
	if err != nil {
		t.Fatal(err)
	}
	net, ok := v.(*Foreign)
	if !ok || net.Module != "__main__" || net.Name != "Net" || len(net.Args) != 0 || net.Args == nil {
		t.Fatalf("model %#v", v)
	}
	mods, _ := net.State.(*Dict).Get("_modules")
	fc, _ := mods.(*Dict).Get("fc")
	lin := fc.(*Foreign)
	if lin.Module != "torch.nn.modules.linear" || lin.Name != "Linear" {
		t.Fatalf("fc %#v", lin)
	}
	params, _ := lin.State.(*Dict).Get("_parameters")
	w, _ := params.(*Dict).Get("weight")
	if wt := w.(*Tensor); !wt.Parameter || !reflect.DeepEqual(wt.Shape, []int64{2, 3}) || wt.DType != "float32" {
		t.Errorf("weight %+v", wt)
	}
}

func TestRealPlainProtocols(t *testing.T) {
	var first any
	for p := 0; p <= 5; p++ {
		data, err := os.ReadFile(fmt.Sprintf("testdata/plain_p%d.pkl", p))
		if err != nil {
			t.Fatal(err)
		}
		v, err := Unpickle(data)
		if err != nil {
			t.Fatalf("protocol %d: %v", p, err)
		}
		d := v.(*Dict)
		if u, _ := d.Get("u"); u != "ü€\n\\" {
			t.Errorf("protocol %d: unicode %q", p, u)
		}
		nested, _ := d.Get("nested")
		b, _ := nested.(*Dict).Get("b")
		if c, _ := b.(*Dict).Get("c"); !reflect.DeepEqual(c, []byte{1, 2}) {
			t.Errorf("protocol %d: bytes %#v", p, c)
		}
		if first == nil {
			first = v
		} else if !reflect.DeepEqual(v, first) {
			t.Errorf("protocol %d differs from protocol 0:\n%#v\n%#v", p, v, first)
		}
	}
}

func TestRealRecursive(t *testing.T) {
	data, _ := os.ReadFile("testdata/recursive.pkl")
	v, err := Unpickle(data)
	if err != nil {
		t.Fatal(err)
	}
	l := v.(*List)
	if len(*l) != 2 || (*l)[0] != int64(1) || (*l)[1].(*List) != l {
		t.Errorf("recursive list %#v", l)
	}
}

func TestRealMalicious(t *testing.T) {
	for name, want := range map[string]string{
		"evil_os_system": "posix.system", "evil_eval_p4": "builtins.eval",
		"evil_subprocess": "subprocess.Popen", "evil_getattr_p0": "builtins.getattr",
	} {
		data, _ := os.ReadFile("testdata/" + name + ".pkl")
		_, err := Unpickle(data)
		var ue *UnsafeError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnsafe) || ue.Module+"."+ue.Name != want {
			t.Errorf("%s: %v, want unsafe %s", name, err, want)
		}
		var oe *OpError
		if !errors.As(err, &oe) || oe.Offset <= 0 || (oe.Op != "GLOBAL" && oe.Op != "STACK_GLOBAL") {
			t.Errorf("%s: position %+v", name, oe)
		}
	}
}
