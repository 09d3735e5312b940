package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
)

// Hand-written opcode streams for what torch 1.13 cannot write here (newer
// rebuild functions) and for hostile input.

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func op(b ...byte) []byte        { return b }

// G is GLOBAL module.name.
func G(module, name string) []byte { return []byte("c" + module + "\n" + name + "\n") }

// S is BINUNICODE s.
func S(s string) []byte {
	return cat(op('X'), binary.LittleEndian.AppendUint32(nil, uint32(len(s))), []byte(s))
}

// I is BININT n.
func I(n int32) []byte { return binary.LittleEndian.AppendUint32([]byte{'J'}, uint32(n)) }

// F is BINFLOAT f.
func F(f float64) []byte { return binary.BigEndian.AppendUint64([]byte{'G'}, math.Float64bits(f)) }

// T is a tuple of items.
func T(items ...[]byte) []byte { return cat(op('('), cat(items...), op('t')) }

// L is a list of items.
func L(items ...[]byte) []byte { return cat(op('('), cat(items...), op('l')) }

// call applies fn to args with REDUCE.
func call(fn []byte, args ...[]byte) []byte { return cat(fn, T(args...), op('R')) }

var (
	none  = op('N')
	tru   = op(0x88)
	fls   = op(0x89)
	stop  = op('.')
	proto = op(0x80, 2)
)

func pid(class, key, loc string, numel int32) []byte {
	return cat(T(S("storage"), G("torch", class), S(key), S(loc), I(numel)), op('Q'))
}

func ints(n ...int32) []byte {
	var parts [][]byte
	for _, v := range n {
		parts = append(parts, I(v))
	}
	return T(parts...)
}

func od() []byte { return call(G("collections", "OrderedDict")) }

func v2(storage []byte, off int32, shape, stride []byte, rg []byte) []byte {
	return call(G("torch._utils", "_rebuild_tensor_v2"), storage, I(off), shape, stride, rg, od())
}

func mustTensor(t *testing.T, data []byte) *Tensor {
	t.Helper()
	v, err := Unpickle(cat(proto, data, stop))
	if err != nil {
		t.Fatal(err)
	}
	tn, ok := v.(*Tensor)
	if !ok {
		t.Fatalf("got %T %#v", v, v)
	}
	return tn
}

func unpickleErr(t *testing.T, data []byte, opts ...Option) error {
	t.Helper()
	_, err := Unpickle(data, opts...)
	if err == nil {
		t.Fatalf("no error for %q", data)
	}
	return err
}

func TestRebuildTensorVariants(t *testing.T) {
	st := pid("HalfStorage", "7", "cuda:1", 24)
	tn := mustTensor(t, call(G("torch._utils", "_rebuild_tensor"), st, I(4), ints(2, 3), ints(3, 1)))
	want := &Tensor{Storage: &StorageRef{Class: "HalfStorage", DType: "float16", Key: "7", Location: "cuda:1", Numel: 24},
		DType: "float16", Offset: 4, Shape: []int64{2, 3}, Stride: []int64{3, 1}, Rebuild: "_rebuild_tensor", Layout: "strided"}
	if !reflect.DeepEqual(tn, want) {
		t.Errorf("_rebuild_tensor:\n%+v\n%+v", tn, want)
	}

	// v2 with the 7th metadata argument
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_tensor_v2"), pid("LongStorage", "0", "cpu", 2),
		I(0), ints(2), ints(1), tru, od(), cat(op('}'), S("k"), I(1), op('s'))))
	if tn.DType != "int64" || !tn.RequiresGrad || tn.Rebuild != "_rebuild_tensor_v2" {
		t.Errorf("v2 with metadata: %+v", tn)
	}

	// v3: untyped storage (numel in bytes) and the dtype as an argument
	for _, extra := range [][]byte{nil, none} {
		args := [][]byte{pid("UntypedStorage", "3", "cpu", 6), I(0), ints(2, 3), ints(3, 1), fls, od(),
			G("torch", "float8_e4m3fn")}
		if extra != nil {
			args = append(args, extra)
		}
		tn = mustTensor(t, call(G("torch._utils", "_rebuild_tensor_v3"), args...))
		if tn.DType != "float8_e4m3fn" || tn.Storage.DType != "" || tn.Storage.Class != "UntypedStorage" ||
			tn.Storage.Numel != 6 || tn.Rebuild != "_rebuild_tensor_v3" {
			t.Errorf("v3 (%d args): %+v %+v", len(args), tn, tn.Storage)
		}
	}
}

func TestParameters(t *testing.T) {
	inner := v2(pid("FloatStorage", "0", "cpu", 4), 0, ints(4), ints(1), fls)
	tn := mustTensor(t, call(G("torch._utils", "_rebuild_parameter"), inner, tru, od()))
	if !tn.Parameter || !tn.RequiresGrad || tn.Rebuild != "_rebuild_tensor_v2" {
		t.Errorf("_rebuild_parameter: %+v", tn)
	}
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_parameter_with_state"), inner, fls, od(),
		cat(op('}'), S("attr"), I(1), op('s'))))
	if !tn.Parameter || tn.RequiresGrad {
		t.Errorf("_rebuild_parameter_with_state: %+v", tn)
	}
	tn = mustTensor(t, call(G("torch.nn.parameter", "Parameter"), inner))
	if !tn.Parameter || !tn.RequiresGrad {
		t.Errorf("Parameter(data): %+v", tn)
	}
	// BUILD on a tensor is harmless and ignored
	tn = mustTensor(t, cat(inner, op('}'), S("x"), I(1), op('s', 'b')))
	if tn.Parameter || tn.Shape[0] != 4 {
		t.Errorf("BUILD on tensor: %+v", tn)
	}
}

func TestRebuildFromTypeV2(t *testing.T) {
	inner := T(pid("FloatStorage", "0", "cpu", 4), I(0), ints(4), ints(1), fls, od())
	fn := G("torch._utils", "_rebuild_tensor_v2")
	for _, c := range []struct {
		mod, name string
		param     bool
		subclass  string
	}{
		{"torch", "Tensor", false, ""},
		{"torch.nn.parameter", "Parameter", true, ""},
		{"my.pkg", "MyTensor", false, "my.pkg.MyTensor"},
	} {
		tn := mustTensor(t, call(G("torch._tensor", "_rebuild_from_type_v2"), fn, G(c.mod, c.name), inner, cat(op('}'))))
		if tn.Parameter != c.param || tn.Subclass != c.subclass || tn.DType != "float32" {
			t.Errorf("%s.%s: %+v", c.mod, c.name, tn)
		}
	}
	// an unknown func: recorded, not called
	v, err := Unpickle(cat(proto, call(G("torch._tensor", "_rebuild_from_type_v2"), G("my", "make"),
		G("torch", "Tensor"), T(I(1)), none), stop))
	if f, ok := v.(*Foreign); err != nil || !ok || f.Name != "_rebuild_from_type_v2" || len(f.Args) != 4 {
		t.Errorf("unknown func: %#v %v", v, err)
	}
}

func TestQuantized(t *testing.T) {
	st := pid("QUInt8Storage", "1", "cpu", 3)
	tn := mustTensor(t, call(G("torch._utils", "_rebuild_qtensor"), st, I(0), ints(3), ints(1),
		T(G("torch", "per_tensor_affine"), F(0.5), I(2)), fls, od()))
	if q := tn.Quant; tn.DType != "quint8" || q == nil || q.Scheme != "per_tensor_affine" || q.Scale != 0.5 || q.ZeroPoint != 2 {
		t.Errorf("per tensor: %+v %+v", tn, tn.Quant)
	}
	scales := v2(pid("DoubleStorage", "2", "cpu", 2), 0, ints(2), ints(1), fls)
	for _, c := range []struct {
		scheme string
		zpCls  string
		want   string
	}{
		{"per_channel_affine", "LongStorage", "per_channel_affine"},
		{"per_channel_affine", "FloatStorage", "per_channel_affine_float_qparams"},
		{"per_channel_affine_float_qparams", "FloatStorage", "per_channel_affine_float_qparams"},
	} {
		zps := v2(pid(c.zpCls, "3", "cpu", 2), 0, ints(2), ints(1), fls)
		tn = mustTensor(t, call(G("torch._utils", "_rebuild_qtensor"), pid("QInt8Storage", "4", "cpu", 6), I(0),
			ints(2, 3), ints(3, 1), T(G("torch", c.scheme), scales, zps, I(1)), fls, od()))
		if q := tn.Quant; q.Scheme != c.want || q.Axis != 1 || q.Scales.DType != "float64" || q.ZeroPoints.Storage.Key != "3" {
			t.Errorf("%s/%s: %+v", c.scheme, c.zpCls, q)
		}
	}
	err := unpickleErr(t, cat(proto, call(G("torch._utils", "_rebuild_qtensor"), st, I(0), ints(3), ints(1),
		T(G("torch", "per_tensor_affine"), F(0.5)), fls, od()), stop))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("short qparams: %v", err)
	}
}

func TestSparse(t *testing.T) {
	idx := v2(pid("LongStorage", "0", "cpu", 4), 0, ints(2, 2), ints(2, 1), fls)
	val := v2(pid("FloatStorage", "1", "cpu", 2), 0, ints(2), ints(1), fls)
	size := call(G("torch", "Size"), ints(3, 3))
	// torch 2.x COO data carries is_coalesced
	tn := mustTensor(t, call(G("torch._utils", "_rebuild_sparse_tensor"), G("torch", "sparse_coo"),
		T(idx, val, size, tru)))
	if tn.Layout != "sparse_coo" || tn.DType != "float32" || !reflect.DeepEqual(tn.Shape, []int64{3, 3}) ||
		len(tn.Components) != 2 || tn.Components[0].Name != "indices" || tn.Components[1].Tensor.Storage.Key != "1" {
		t.Errorf("coo: %+v", tn)
	}
	layout := call(G("torch.serialization", "_get_layout"), S("torch.sparse_csc"))
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_sparse_tensor"), layout, T(idx, idx, val, size)))
	if tn.Layout != "sparse_csc" || tn.Components[0].Name != "ccol_indices" || tn.Components[1].Name != "row_indices" {
		t.Errorf("csc: %+v", tn)
	}
	err := unpickleErr(t, cat(proto, call(G("torch._utils", "_rebuild_sparse_tensor"), G("torch", "strided"), T(idx)), stop))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("strided sparse: %v", err)
	}
}

func TestStoragelessTensors(t *testing.T) {
	tn := mustTensor(t, call(G("torch._utils", "_rebuild_meta_tensor_no_storage"), G("torch", "bfloat16"),
		ints(2, 3), ints(3, 1), tru))
	if tn.Device != "meta" || tn.Storage != nil || tn.DType != "bfloat16" || !tn.RequiresGrad {
		t.Errorf("meta: %+v", tn)
	}
	dev := call(G("torch", "device"), S("cuda"), I(2))
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_wrapper_subclass"), G("torch.distributed", "DTensor"),
		G("torch", "float32"), ints(4), ints(1), I(0), G("torch", "strided"), dev, fls))
	if tn.Subclass != "torch.distributed.DTensor" || tn.Device != "cuda:2" || tn.Layout != "strided" {
		t.Errorf("wrapper: %+v", tn)
	}
	buf := v2(pid("FloatStorage", "0", "cpu", 6), 0, ints(6), ints(1), fls)
	sz := v2(pid("LongStorage", "1", "cpu", 4), 0, ints(2, 2), ints(2, 1), fls)
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_nested_tensor"), buf, sz, sz, sz))
	if tn.Layout != "nested" || len(tn.Components) != 4 || tn.DType != "float32" || tn.Components[3].Name != "storage_offsets" {
		t.Errorf("nested: %+v", tn)
	}
	cpu := v2(pid("FloatStorage", "5", "cpu", 4), 0, ints(4), ints(1), fls)
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_device_tensor_from_cpu_tensor"), cpu, G("torch", "float32"),
		S("mtia:0"), tru))
	if tn.Device != "mtia:0" || tn.Storage.Key != "5" || !tn.RequiresGrad {
		t.Errorf("from cpu tensor: %+v", tn)
	}
	// numpy array: _reconstruct(ndarray, (0,), b'b') + BUILD (1, shape, dtype, False, raw)
	arr := cat(call(G("numpy.core.multiarray", "_reconstruct"), G("numpy", "ndarray"), ints(0), op('C', 1, 'b')),
		T(I(1), ints(2, 2), call(G("numpy", "dtype"), S("f4"), fls, tru), fls, op('C', 0)), op('b'))
	tn = mustTensor(t, call(G("torch._utils", "_rebuild_device_tensor_from_numpy"), arr, G("torch", "float32"),
		S("xla:0"), fls))
	if tn.Device != "xla:0" || !reflect.DeepEqual(tn.Shape, []int64{2, 2}) {
		t.Errorf("numpy: %+v", tn)
	}
}

func TestTorchValues(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want any
	}{
		{call(G("torch", "device"), S("cuda:1")), Device("cuda:1")},
		{call(G("torch", "device"), S("cuda"), I(0)), Device("cuda:0")},
		{call(G("torch", "device"), S("mps"), none), Device("mps")},
		{call(G("torch", "Size"), ints(1, 2)), &Tuple{int64(1), int64(2)}},
		{G("torch", "float"), Global{"torch", "float"}},
		{G("torch", "per_channel_affine"), Global{"torch", "per_channel_affine"}},
		{call(G("torch.serialization", "_get_layout"), S("torch.sparse_bsr")), Global{"torch", "sparse_bsr"}},
		{call(G("_codecs", "encode"), S("\u00ff\u0001"), S("latin1")), []byte{0xff, 1}},
		{call(G("__builtin__", "bytearray"), S("\u00e9"), S("latin-1")), []byte{0xe9}},
		{call(G("builtins", "complex"), F(1), I(2)), complex(1, 2)},
		{call(G("builtins", "set"), L(I(1), I(1), I(2))), &Set{Items: []any{int64(1), int64(2)}}},
		{call(G("collections", "OrderedDict"), L(T(S("a"), I(1)), T(S("b"), I(2)))),
			&Dict{Class: "collections.OrderedDict", Entries: []DictEntry{{"a", int64(1)}, {"b", int64(2)}}}},
		{call(G("collections", "Counter"), cat(op('}'), S("x"), I(3), op('s'))),
			&Dict{Class: "collections.Counter", Entries: []DictEntry{{"x", int64(3)}}}},
		{G("argparse", "Namespace"), &Object{Module: "argparse", Name: "Namespace"}},
		{G("my.mod", "Thing"), &Foreign{Module: "my.mod", Name: "Thing"}},
		{op(0x8a, 0), int64(0)},                          // LONG1 with no bytes
		{op(0x8a, 2, 0x00, 0x80), int64(-32768)},         // LONG1
		{op(0x8b, 2, 0, 0, 0, 0xff, 0x7f), int64(32767)}, // LONG4
		{cat(op(0x8b, 0, 0, 0, 0)), int64(0)},
		{[]byte("S'a\\x41\\n\\'q'\n"), "aA\n'q"},
		{[]byte("Vcaf\xe9\\u20ac\n"), "café€"},
		{[]byte("I01\n"), true},
		{[]byte("L12345678901234567890123L\n"), mustBig("12345678901234567890123")},
	} {
		v, err := Unpickle(cat(proto, c.in, stop))
		if err != nil || !reflect.DeepEqual(v, c.want) {
			t.Errorf("%q: %#v, %v; want %#v", c.in, v, err, c.want)
		}
	}
	big9 := append(op(0x8b, 9, 0, 0, 0), make([]byte, 8)...)
	big9 = append(big9, 0x80)
	v, err := Unpickle(cat(proto, big9, stop))
	want := new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 71))
	if err != nil || v.(*big.Int).Cmp(want) != 0 {
		t.Errorf("LONG4 9 bytes: %v %v", v, err)
	}
}

func mustBig(s string) *big.Int {
	b, _ := new(big.Int).SetString(s, 10)
	return b
}

func TestObjectsAndForeign(t *testing.T) {
	// NEWOBJ + SETITEMS + APPENDS + BUILD on an unknown class
	in := cat(G("my.mod", "MyDict"), op(')'), op(0x81), op('('), S("a"), I(1), op('u'),
		op('('), I(5), op('e'), op('}'), S("attr"), tru, op('s'), op('b'))
	v, err := Unpickle(cat(proto, in, stop))
	if err != nil {
		t.Fatal(err)
	}
	f := v.(*Foreign)
	st, _ := f.State.(*Dict).Get("attr")
	if f.Module != "my.mod" || len(f.Args) != 0 || f.Args == nil || st != true ||
		!reflect.DeepEqual(f.DictItems, []DictEntry{{"a", int64(1)}}) || !reflect.DeepEqual(f.ListItems, []any{int64(5)}) {
		t.Errorf("foreign: %#v", f)
	}
	// copy_reg._reconstructor with an OrderedDict base, protocol 0/1 style
	in = call(G("copy_reg", "_reconstructor"), G("my.mod", "MyOD"), G("collections", "OrderedDict"),
		cat(op('}'), S("k"), I(2), op('s')))
	v, err = Unpickle(cat(proto, in, stop))
	if f, ok := v.(*Foreign); err != nil || !ok || f.Name != "MyOD" || !reflect.DeepEqual(f.DictItems, []DictEntry{{"k", int64(2)}}) {
		t.Errorf("_reconstructor OrderedDict: %#v %v", v, err)
	}
	in = call(G("copy_reg", "_reconstructor"), G("argparse", "Namespace"), G("__builtin__", "object"), none)
	v, err = Unpickle(cat(proto, in, stop))
	if o, ok := v.(*Object); err != nil || !ok || o.Name != "Namespace" {
		t.Errorf("_reconstructor object: %#v %v", v, err)
	}
	// INST and OBJ
	v, err = Unpickle(cat(op('('), I(1), []byte("imy.mod\nK\n"), stop))
	if f, ok := v.(*Foreign); err != nil || !ok || !reflect.DeepEqual(f.Args, []any{int64(1)}) {
		t.Errorf("INST: %#v %v", v, err)
	}
	v, err = Unpickle(cat(proto, op('('), G("my.mod", "K"), I(2), op('o'), stop))
	if f, ok := v.(*Foreign); err != nil || !ok || !reflect.DeepEqual(f.Args, []any{int64(2)}) {
		t.Errorf("OBJ: %#v %v", v, err)
	}
	// NEWOBJ_EX records kwargs as a final dict
	v, err = Unpickle(cat(op(0x80, 4), G("my.mod", "K"), T(I(1)), op('}'), op(0x92), stop))
	if f, ok := v.(*Foreign); err != nil || !ok || len(f.Args) != 2 {
		t.Errorf("NEWOBJ_EX: %#v %v", v, err)
	}
	// calling a value global is refused
	err = unpickleErr(t, cat(proto, call(G("torch", "float32")), stop))
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("call dtype: %v", err)
	}
}

func TestContainers(t *testing.T) {
	// dict keys: a key stored twice keeps its first slot and last value
	v, _ := Unpickle(cat(proto, op('}'), S("a"), I(1), op('s'), S("b"), I(2), op('s'), S("a"), I(3), op('s'), stop))
	if d := v.(*Dict); !reflect.DeepEqual(d.Entries, []DictEntry{{"a", int64(3)}, {"b", int64(2)}}) {
		t.Errorf("dict dup: %#v", d.Entries)
	}
	// bytes as set items and OrderedDict keys: gopickle would hash them in Go maps
	in := cat(op(0x80, 4), op(0x8f), op('('), op('C', 1, 'x'), op('C', 1, 'x'), op('C', 1, 'y'), op(0x90),
		op('('), op('C', 1, 'z'), op(0x91), op(0x86))
	v, err := Unpickle(cat(in, stop))
	if err != nil {
		t.Fatal(err)
	}
	tup := *v.(*Tuple)
	if s := tup[0].(*Set); !reflect.DeepEqual(s.Items, []any{[]byte("x"), []byte("y")}) || s.Frozen {
		t.Errorf("set of bytes: %#v", s)
	}
	if s := tup[1].(*Set); !reflect.DeepEqual(s.Items, []any{[]byte("z")}) || !s.Frozen {
		t.Errorf("frozenset of bytes: %#v", s)
	}
	v, err = Unpickle(cat(op(0x80, 3), od(), op('('), op('C', 1, 'k'), I(1), op(']'), I(2), op('u'), stop))
	if err != nil {
		t.Fatal(err)
	}
	if d := v.(*Dict); len(d.Entries) != 2 || !reflect.DeepEqual(d.Entries[0].Key, []byte("k")) {
		t.Errorf("OrderedDict with bytes and list keys: %#v", d)
	}
	// torch state dicts carry _metadata as the OrderedDict's BUILD state
	v, _ = Unpickle(cat(proto, od(), op('}'), S("_metadata"), od(), op('s'), op('b'), stop))
	if d := v.(*Dict); d.State == nil {
		t.Errorf("OrderedDict state lost: %#v", d)
	}
	// shared values stay shared
	v, _ = Unpickle(cat(proto, op(']'), op('q', 0), op('h', 0), op(0x86), stop))
	if tp := *v.(*Tuple); tp[0].(*List) != tp[1].(*List) {
		t.Errorf("memo sharing lost")
	}
}

func TestUnsafeGlobals(t *testing.T) {
	for _, g := range [][2]string{
		{"os", "system"}, {"posix", "system"}, {"nt", "system"}, {"os.path", "join"}, {"sys", "exit"},
		{"subprocess", "Popen"}, {"builtins", "eval"}, {"__builtin__", "exec"}, {"builtins", "compile"},
		{"builtins", "open"}, {"builtins", "getattr"}, {"builtins", "__import__"}, {"builtins", "setattr"},
		{"shutil", "rmtree"}, {"socket", "socket"}, {"importlib", "import_module"}, {"pickle", "loads"},
		{"runpy", "run_path"}, {"code", "interact"}, {"pty", "spawn"}, {"webbrowser", "open"},
		{"marshal", "loads"}, {"ctypes", "CDLL"}, {"multiprocessing.util", "spawnv_passfds"},
		{"commands", "getoutput"}, {"operator", "attrgetter"},
	} {
		want := normalizeModule(g[0]) + "." + g[1]
		// GLOBAL, STACK_GLOBAL (memoized strings), and INST all stop at the name
		for _, in := range [][]byte{
			cat(proto, L(I(1), G(g[0], g[1])), stop),
			cat(op(0x80, 4), op(0x8c, byte(len(g[0]))), []byte(g[0]), op(0x94), op(0x8c, byte(len(g[1]))), []byte(g[1]),
				op(0x94), op('0', '0'), op('h', 0), op('h', 1), op(0x93), stop),
			cat(op('('), []byte("i"+g[0]+"\n"+g[1]+"\n"), stop),
		} {
			_, err := Unpickle(in)
			var ue *UnsafeError
			if !errors.As(err, &ue) || ue.Module+"."+ue.Name != want || !errors.Is(err, ErrUnsafe) {
				t.Errorf("%s: %v", want, err)
			}
			if !strings.Contains(err.Error(), want) {
				t.Errorf("message %q does not name %s", err, want)
			}
		}
	}
}

func TestMalformed(t *testing.T) {
	for name, in := range map[string][]byte{
		"empty":              {},
		"no stop":            cat(proto, I(1)),
		"unknown opcode":     cat(proto, op(0xff), stop),
		"protocol 6":         cat(op(0x80, 6), none, stop),
		"truncated BININT":   cat(proto, op('J', 1, 2)),
		"huge BINBYTES":      cat(op(0x80, 3), op('B', 0xff, 0xff, 0xff, 0xff), stop),
		"huge BINUNICODE8":   cat(op(0x80, 4), op(0x8d, 0, 0, 0, 0, 0, 0, 0, 0x80), stop),
		"huge FRAME":         cat(op(0x80, 4), op(0x95, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), none, stop),
		"negative BINSTRING": cat(proto, op('T', 0xff, 0xff, 0xff, 0xff), stop),
		"memo miss":          cat(proto, op('h', 3), stop),
		"odd DICT":           cat(proto, op('('), I(1), op('d'), stop),
		"odd SETITEMS":       cat(proto, op('}', '('), I(1), op('u'), stop),
		"underflow":          cat(proto, op('R'), stop),
		"POP empty":          cat(proto, op('0'), stop),
		"stop empty":         cat(proto, stop),
		"mark stop":          cat(proto, op('('), stop),
		"STACK_GLOBAL ints":  cat(op(0x80, 4), I(1), I(2), op(0x93), stop),
		"EXT1":               cat(proto, op(0x82, 1), stop),
		"NEXT_BUFFER":        cat(op(0x80, 5), op(0x97), stop),
		"unquoted STRING":    cat([]byte("Sabc\n"), stop),
		"bad \\u":            cat([]byte("V\\u12\n"), stop),
		"long INT":           cat([]byte("I"+strings.Repeat("9", 5000)+"\n"), stop),
		"REDUCE non-tuple":   cat(proto, G("torch", "Size"), I(1), op('R'), stop),
		"v2 arity":           cat(proto, call(G("torch._utils", "_rebuild_tensor_v2"), I(1)), stop),
		"v2 not storage":     cat(proto, v2(I(1), 0, ints(1), ints(1), fls), stop),
		"v2 shape list int":  cat(proto, v2(pid("FloatStorage", "0", "cpu", 1), 0, I(3), ints(1), fls), stop),
		"v2 rank mismatch":   cat(proto, v2(pid("FloatStorage", "0", "cpu", 1), 0, ints(1, 1), ints(1), fls), stop),
		"v2 untyped":         cat(proto, v2(pid("UntypedStorage", "0", "cpu", 1), 0, ints(1), ints(1), fls), stop),
		"v2 65 dims":         cat(proto, v2(pid("FloatStorage", "0", "cpu", 1), 0, ints(make([]int32, 65)...), ints(1), fls), stop),
		"bad pid":            cat(proto, T(S("storage"), G("torch", "NopeStorage"), S("0"), S("cpu"), I(1)), op('Q'), stop),
		"pid view too long":  cat(proto, T(S("storage"), G("torch", "FloatStorage"), S("0"), S("cpu"), I(1), T(S("v"), I(0), I(2))), op('Q'), stop),
		"device bad":         cat(proto, call(G("torch", "device"), I(1)), stop),
		"codecs bad":         cat(proto, call(G("_codecs", "encode"), S("€"), S("latin1")), stop),
		"layout bad":         cat(proto, call(G("torch.serialization", "_get_layout"), S("torch.nope")), stop),
	} {
		_, err := Unpickle(in)
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
		var oe *OpError
		if len(in) > 0 && !errors.As(err, &oe) {
			t.Errorf("%s: no position in %v", name, err)
		}
	}
}

func TestErrorOffsets(t *testing.T) {
	// the failing REDUCE of a rebuild call is reported at its own offset
	bad := call(G("torch._utils", "_rebuild_tensor_v2"), I(1))
	in := cat(proto, op(0x8c, 1, 'x'), op('0'), bad, stop) // SHORT_BINUNICODE is rewritten, offsets still refer to the input
	_, err := Unpickle(in)
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != "REDUCE" || oe.Offset != int64(len(in)-2) {
		t.Errorf("got %+v, want REDUCE at %d", oe, len(in)-2)
	}
	// an error gopickle finds (APPEND on a tuple) after a dropped FRAME and
	// a rewritten EMPTY_SET still maps back to the input offset
	rest := cat(op(0x8f, '0', ')'), I(1), op('a'), stop)
	frame := binary.LittleEndian.AppendUint64([]byte{0x95}, uint64(len(rest)))
	in = cat(op(0x80, 4), frame, rest)
	_, err = Unpickle(in)
	if !errors.As(err, &oe) || oe.Op != "APPEND" || oe.Offset != 19 || !errors.Is(err, ErrMalformed) {
		t.Errorf("got %+v (%v), want APPEND at 19", oe, err)
	}
}

func TestLimits(t *testing.T) {
	deep := cat(proto, bytes.Repeat(op('('), 20), stop)
	if err := unpickleErr(t, deep, WithLimits(Limits{MaxDepth: 10})); !errors.Is(err, ErrLimit) {
		t.Errorf("marks: %v", err)
	}
	// nesting built through the memo with a constant stack: [[[...]]]
	var b []byte
	b = append(b, proto...)
	b = append(b, ']', 'q', 0)
	for i := 0; i < 50; i++ {
		b = append(b, ']', 'h', 0, 'a', 'q', 0)
	}
	b = append(b, '.')
	if err := unpickleErr(t, b, WithLimits(Limits{MaxDepth: 20})); !errors.Is(err, ErrLimit) {
		t.Errorf("value depth: %v", err)
	}
	if _, err := Unpickle(b); err != nil {
		t.Errorf("default depth: %v", err)
	}
	if err := unpickleErr(t, cat(proto, none, op('r', 0, 0, 0, 1), stop), WithLimits(Limits{MaxMemo: 100})); !errors.Is(err, ErrLimit) {
		t.Errorf("memo: %v", err)
	}
	if err := unpickleErr(t, cat(proto, L(I(1), I(2), I(3)), stop), WithLimits(Limits{MaxContainerLen: 2})); !errors.Is(err, ErrLimit) {
		t.Errorf("container: %v", err)
	}
	appended := cat(proto, op(']'), I(1), op('a'), I(2), op('a'), I(3), op('a'), stop)
	if err := unpickleErr(t, appended, WithLimits(Limits{MaxContainerLen: 2})); !errors.Is(err, ErrLimit) {
		t.Errorf("container by APPEND: %v", err)
	}
	if err := unpickleErr(t, cat(proto, L(I(1), I(2), I(3)), stop), WithLimits(Limits{MaxOps: 4})); !errors.Is(err, ErrLimit) {
		t.Errorf("ops: %v", err)
	}
	// _rebuild_from_type_v2 calling itself through memoized argument tuples
	rft, tensor := G("torch._tensor", "_rebuild_from_type_v2"), G("torch", "Tensor")
	chain := cat(proto, T(pid("FloatStorage", "0", "cpu", 1), I(0), ints(1), ints(1), fls, od()), op('q', 0, '0'),
		T(G("torch._utils", "_rebuild_tensor_v2"), tensor, op('h', 0), none), op('q', 0, '0'))
	for i := 0; i < 30; i++ {
		chain = cat(chain, T(rft, tensor, op('h', 0), none), op('q', 0, '0'))
	}
	chain = cat(chain, rft, T(rft, tensor, op('h', 0), none), op('R'), stop)
	if err := unpickleErr(t, chain, WithLimits(Limits{MaxDepth: 10})); !errors.Is(err, ErrLimit) {
		t.Errorf("rebuild recursion: %v", err)
	}
	if v, err := Unpickle(chain); err != nil || v.(*Tensor).Rebuild != "_rebuild_tensor_v2" {
		t.Errorf("rebuild chain: %v %v", v, err)
	}
	// a memoized list passed to OrderedDict again and again would copy
	// quadratically; the copy budget stops it.
	var amp []byte
	amp = append(amp, proto...)
	amp = append(amp, G("collections", "OrderedDict")...)
	amp = append(amp, 'q', 0, '(')
	for i := 0; i < 2000; i++ {
		amp = append(amp, T(S("k"), I(int32(i)))...)
	}
	amp = append(amp, 'l', 'q', 1, 0x85, 'q', 2, '(')
	for i := 0; i < 3000; i++ {
		amp = append(amp, 'h', 0, 'h', 2, 'R')
	}
	amp = append(amp, 'l', '.')
	if err := unpickleErr(t, amp); !errors.Is(err, ErrLimit) {
		t.Errorf("copy amplification: %v", err)
	}
}

var errMine = errors.New("mine")

func TestPersistentLoadHook(t *testing.T) {
	var pids []any
	hook := func(p any) (any, error) {
		pids = append(pids, p)
		ref, err := ParseStoragePID(p)
		if err != nil {
			return nil, err
		}
		ref.Ref = "resolved " + ref.Key
		return ref, nil
	}
	st := pid("FloatStorage", "9", "cpu", 1)
	v, err := Unpickle(cat(proto, v2(st, 0, ints(1), ints(1), fls), stop), WithPersistentLoad(hook))
	if err != nil {
		t.Fatal(err)
	}
	if v.(*Tensor).Storage.Ref != "resolved 9" || len(pids) != 1 {
		t.Errorf("hook result lost: %+v", v)
	}
	want := &Tuple{"storage", Global{"torch", "FloatStorage"}, "9", "cpu", int64(1)}
	if !reflect.DeepEqual(pids[0], want) {
		t.Errorf("pid %#v", pids[0])
	}
	_, err = Unpickle(cat(proto, st, stop), WithPersistentLoad(func(any) (any, error) { return nil, errMine }))
	var oe *OpError
	if !errors.Is(err, errMine) || errors.Is(err, ErrMalformed) || !errors.As(err, &oe) || oe.Op != "BINPERSID" {
		t.Errorf("hook error: %v", err)
	}
	// protocol-0 PERSID passes a string
	v, err = Unpickle([]byte("Pabc\n."), WithPersistentLoad(func(p any) (any, error) { return p, nil }))
	if v != "abc" || err != nil {
		t.Errorf("PERSID: %v %v", v, err)
	}
	// without a hook, a non-storage pid is malformed
	if _, err := Unpickle([]byte("Pabc\n.")); !errors.Is(err, ErrMalformed) {
		t.Errorf("default hook: %v", err)
	}
}

func TestParseStoragePID(t *testing.T) {
	ref, err := ParseStoragePID(&Tuple{"storage", Global{"torch.cuda", "FloatStorage"}, int64(140234), "cuda:0", int64(3), nil})
	if err != nil || ref.Key != "140234" || ref.DType != "float32" || ref.Location != "cuda:0" {
		t.Errorf("legacy pid: %+v %v", ref, err)
	}
	for _, bad := range []any{nil, "x", &Tuple{}, &Tuple{"storage", Global{"torch", "FloatStorage"}, "0", "cpu", int64(-1)},
		&Tuple{"nope", Global{"torch", "FloatStorage"}, "0", "cpu", int64(1)},
		&Tuple{"storage", "FloatStorage", "0", "cpu", int64(1)},
		&Tuple{"storage", Global{"torch", "FloatStorage"}, 1.5, "cpu", int64(1)},
		&Tuple{"storage", Global{"torch", "FloatStorage"}, "0", nil, int64(1)}} {
		if _, err := ParseStoragePID(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%#v: %v", bad, err)
		}
	}
}

// Negative sizes are reported as the file has them: the caller checks the
// geometry against the storage and names the tensor.
func TestNegativeSizePassesThrough(t *testing.T) {
	v, err := Unpickle(cat(proto, v2(pid("FloatStorage", "0", "cpu", 1), 0, ints(-1), ints(1), fls), stop))
	if err != nil {
		t.Fatal(err)
	}
	if tt, ok := v.(*Tensor); !ok || len(tt.Shape) != 1 || tt.Shape[0] != -1 {
		t.Fatalf("got %#v, want a tensor of shape [-1]", v)
	}
}
