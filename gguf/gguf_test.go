package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
)

func sampleKV() []KV {
	return []KV{
		{"general.architecture", TypeString, "llama"},
		{"general.alignment", TypeUint32, uint32(64)},
		{"u8", TypeUint8, uint8(7)}, {"i8", TypeInt8, int8(-7)}, {"u16", TypeUint16, uint16(65535)},
		{"i16", TypeInt16, int16(-300)}, {"i32", TypeInt32, int32(-1 << 30)}, {"f32", TypeFloat32, float32(1.5)},
		{"b", TypeBool, true}, {"u64", TypeUint64, uint64(1 << 60)}, {"i64", TypeInt64, int64(-1 << 60)},
		{"f64", TypeFloat64, math.Pi},
		{"tokens", TypeArray, &Array{Elem: TypeString, Values: []string{"<s>", "</s>", "héllo"}}},
		{"scores", TypeArray, &Array{Elem: TypeFloat32, Values: []float32{0, -1, 2.5}}},
		{"nested", TypeArray, &Array{Elem: TypeArray, Values: []*Array{
			{Elem: TypeInt32, Values: []int32{1, 2}}, {Elem: TypeString, Values: []string{}}}}},
		{"bools", TypeArray, &Array{Elem: TypeBool, Values: []bool{true, false}}},
	}
}

func sampleTensors() []TensorSpec {
	return []TensorSpec{
		{"a", []uint64{32, 3}, ggml.Q8_0},
		{"b", []uint64{5}, ggml.F32},
		{"c", []uint64{256, 2}, ggml.Q4_K},
		{"scalar", nil, ggml.F16},
	}
}

func write(t testing.TB, kvs []KV, ts []TensorSpec) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, kvs, ts)
	if err != nil {
		t.Fatal(err)
	}
	for i, ti := range w.Tensors() {
		data := bytes.Repeat([]byte{byte(i + 1)}, int(ti.Size))
		if err := w.WriteTensor(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	b := write(t, sampleKV(), sampleTensors())
	f, err := Parse(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.BigEndian || f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("header %+v", f)
	}
	if !reflect.DeepEqual(f.KV, sampleKV()) {
		t.Errorf("metadata\n got %#v\nwant %#v", f.KV, sampleKV())
	}
	wantSize := []int64{3 * 34, 20, 2 * 144, 2}
	for i, ti := range f.Tensors {
		s := sampleTensors()[i]
		if ti.Name != s.Name || ti.Type != s.Type || ti.Size != wantSize[i] || ti.Offset%64 != 0 || len(ti.Dims) != len(s.Dims) {
			t.Errorf("tensor %d: %+v", i, ti)
		}
		got := b[f.DataOffset+int64(ti.Offset) : f.DataOffset+int64(ti.Offset)+ti.Size]
		if !bytes.Equal(got, bytes.Repeat([]byte{byte(i + 1)}, int(ti.Size))) {
			t.Errorf("tensor %s: data not where the info says", ti.Name)
		}
	}
	if s := f.Tensors[0].Shape(); !reflect.DeepEqual(s, []int64{3, 32}) {
		t.Errorf("shape %v", s)
	}
}

// be writes a big-endian version-3 (or version-1 with v1) file by hand.
type hand struct {
	b  bytes.Buffer
	o  binary.AppendByteOrder
	v1 bool
}

func (h *hand) u32(v uint32) { h.b.Write(h.o.AppendUint32(nil, v)) }
func (h *hand) u64(v uint64) { h.b.Write(h.o.AppendUint64(nil, v)) }
func (h *hand) n(v uint64) {
	if h.v1 {
		h.u32(uint32(v))
	} else {
		h.u64(v)
	}
}
func (h *hand) str(s string) { h.n(uint64(len(s))); h.b.WriteString(s) }
func (h *hand) pad(a int) {
	for h.b.Len()%a != 0 {
		h.b.WriteByte(0)
	}
}

// simple writes: one string kv, one u32 array kv, one F32 tensor [2] at 0.
func simple(o binary.AppendByteOrder, version uint32) []byte {
	h := &hand{o: o, v1: version == 1}
	h.b.WriteString("GGUF")
	h.u32(version)
	h.n(1)
	h.n(2)
	h.str("general.name")
	h.u32(uint32(TypeString))
	h.str("x")
	h.str("ids")
	h.u32(uint32(TypeArray))
	h.u32(uint32(TypeUint32))
	h.n(2)
	h.u32(7)
	h.u32(9)
	h.str("w")
	h.u32(1)
	h.n(2)
	h.u32(uint32(ggml.F32))
	h.u64(0)
	h.pad(32)
	h.u32(math.Float32bits(1))
	h.u32(math.Float32bits(2))
	return h.b.Bytes()
}

func TestVersionsAndByteOrders(t *testing.T) {
	for _, c := range []struct {
		name    string
		o       binary.AppendByteOrder
		version uint32
	}{{"v3 le", binary.LittleEndian, 3}, {"v3 be", binary.BigEndian, 3}, {"v2 le", binary.LittleEndian, 2},
		{"v2 be", binary.BigEndian, 2}, {"v1 le", binary.LittleEndian, 1}} {
		b := simple(c.o, c.version)
		f, err := Parse(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		ids, _ := f.Get("ids")
		name, _ := f.Get("general.name")
		if f.Version != c.version || f.BigEndian != (c.o == binary.BigEndian) || !reflect.DeepEqual(ids.Value, &Array{Elem: TypeUint32, Values: []uint32{7, 9}}) ||
			name.Value != "x" || len(f.Tensors) != 1 || f.Tensors[0].Size != 8 || f.DataOffset != int64(len(b)-8) {
			t.Errorf("%s: %+v %+v", c.name, f, f.Tensors)
		}
	}
}

// TestHostile: each malformed file fails with the right sentinel, quickly
// and without allocating what its counts claim.
func TestHostile(t *testing.T) {
	good := write(t, sampleKV()[:1], []TensorSpec{{"a", []uint64{4}, ggml.F32}, {"b", []uint64{4}, ggml.F32}})
	le := binary.LittleEndian
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	// Offsets in good: magic 0, version 4, n_tensors 8, n_kv 16, key len 24,
	// key "general.architecture" 32..52, type 52, str len 56, "llama" 64..69,
	// tensor "a": len 69, name 77, n_dims 78, dim 82, type 90, offset 94;
	// tensor "b": len 102, name 110, n_dims 111, dim 115, type 123, offset 127.
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrNotGGUF},
		{"not gguf", []byte("PK\x03\x04...."), ErrNotGGUF},
		{"version 4", mut(func(b []byte) []byte { le.PutUint32(b[4:], 4); return b }), ErrVersion},
		{"huge tensor count", mut(func(b []byte) []byte { le.PutUint64(b[8:], 1<<62); return b }), ErrLimit},
		{"tensor count past the file", mut(func(b []byte) []byte { le.PutUint64(b[8:], 1<<19); return b }), ErrTruncated},
		{"huge kv count", mut(func(b []byte) []byte { le.PutUint64(b[16:], 1<<40); return b }), ErrLimit},
		{"huge string", mut(func(b []byte) []byte { le.PutUint64(b[24:], 1<<50); return b }), ErrLimit},
		{"string past the end", mut(func(b []byte) []byte { le.PutUint64(b[56:], 1<<20); return b }), ErrTruncated},
		{"unknown value type", mut(func(b []byte) []byte { le.PutUint32(b[52:], 13); return b }), ErrMalformed},
		{"unknown ggml type", mut(func(b []byte) []byte { le.PutUint32(b[90:], 4); return b }), ErrMalformed},
		{"5 dims", mut(func(b []byte) []byte { le.PutUint32(b[78:], 5); return b }), ErrMalformed},
		{"misaligned offset", mut(func(b []byte) []byte { le.PutUint64(b[127:], 16); return b }), ErrMalformed},
		{"overlap", mut(func(b []byte) []byte { le.PutUint64(b[127:], 0); return b }), ErrMalformed},
		{"data past the end", mut(func(b []byte) []byte { le.PutUint64(b[115:], 1<<20); return b }), ErrTruncated},
		{"dims overflow", mut(func(b []byte) []byte { le.PutUint64(b[115:], 1<<62); return b }), ErrMalformed},
		{"duplicate tensor", mut(func(b []byte) []byte { b[110] = 'a'; return b }), ErrMalformed},
		{"cut in the header", good[:20], ErrTruncated},
		{"cut in the tensor infos", good[:100], ErrTruncated},
	}
	for _, c := range cases {
		_, err := Parse(bytes.NewReader(c.data), int64(len(c.data)))
		var fe *FormatError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// An array of arrays nested past the limit, and arrays whose counts the
	// file cannot hold.
	h := &hand{o: le}
	h.b.WriteString("GGUF")
	h.u32(3)
	h.u64(0)
	h.u64(1)
	h.str("deep")
	h.u32(uint32(TypeArray))
	for i := 0; i < 100; i++ {
		h.u32(uint32(TypeArray))
		h.u64(1)
	}
	h.u32(uint32(TypeUint8))
	h.u64(0)
	if _, err := Parse(bytes.NewReader(h.b.Bytes()), int64(h.b.Len())); !errors.Is(err, ErrLimit) {
		t.Errorf("deep nesting: %v", err)
	}
	h = &hand{o: le}
	h.b.WriteString("GGUF")
	h.u32(3)
	h.u64(0)
	h.u64(1)
	h.str("big")
	h.u32(uint32(TypeArray))
	h.u32(uint32(TypeString))
	h.u64(1 << 25)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	if _, err := Parse(bytes.NewReader(h.b.Bytes()), int64(h.b.Len())); !errors.Is(err, ErrTruncated) {
		t.Errorf("array count past the file: %v", err)
	}
	runtime.ReadMemStats(&ms)
	if ms.TotalAlloc-before > 1<<20 {
		t.Errorf("a 60-byte file with a 32M-element array count allocated %d bytes", ms.TotalAlloc-before)
	}
}

func TestWriterMisuse(t *testing.T) {
	var b bytes.Buffer
	if _, err := NewWriter(&b, []KV{{"x", TypeUint32, int32(1)}}, nil); !errors.Is(err, ErrWrite) {
		t.Errorf("wrong Go type: %v", err)
	}
	if _, err := NewWriter(&b, nil, []TensorSpec{{"q", []uint64{33}, ggml.Q8_0}}); !errors.Is(err, ErrWrite) {
		t.Errorf("row not a block multiple: %v", err)
	}
	w, _ := NewWriter(&b, nil, []TensorSpec{{"a", []uint64{4}, ggml.F32}})
	if err := w.WriteTensor(bytes.NewReader(make([]byte, 3))); !errors.Is(err, ErrWrite) {
		t.Errorf("short tensor: %v", err)
	}
	w, _ = NewWriter(&b, nil, []TensorSpec{{"a", []uint64{4}, ggml.F32}})
	if err := w.Close(); !errors.Is(err, ErrWrite) {
		t.Errorf("unwritten tensor: %v", err)
	}
}

func TestJSON(t *testing.T) {
	kvs := []KV{{"f", TypeFloat32, float32(math.Inf(-1))}, {"a", TypeArray, &Array{Elem: TypeUint8, Values: []uint8{1, 2}}},
		{"s", TypeArray, &Array{Elem: TypeFloat32, Values: []float32{1, float32(math.NaN())}}}}
	b, err := json.Marshal(kvs)
	want := `[{"key":"f","type":"float32","value":"-Inf"},{"key":"a","type":"array","value":{"type":"array","elem":"uint8","len":2,"values":[1,2]}},{"key":"s","type":"array","value":{"type":"array","elem":"float32","len":2,"values":[1,"NaN"]}}]`
	if err != nil || string(b) != want {
		t.Errorf("%s %v", b, err)
	}
}

// TestJSONRoundTrip: every value type survives MarshalJSON/UnmarshalJSON
// with its Go type, so metadata kept in a safetensors header comes back
// byte-identical in a GGUF written from it.
func TestJSONRoundTrip(t *testing.T) {
	in := append(sampleKV(), KV{"nan", TypeFloat32, float32(math.Inf(1))})
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out []KV
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("\n got %#v\nwant %#v", out, in)
	}
	for _, c := range []struct {
		t    ValueType
		s    string
		want any
	}{{TypeUint32, "4096", uint32(4096)}, {TypeFloat32, "1e-5", float32(1e-5)}, {TypeBool, "true", true}, {TypeString, "x y", "x y"}, {TypeInt8, "-3", int8(-3)}} {
		if v, err := ParseValue(c.t, c.s); err != nil || v != c.want {
			t.Errorf("ParseValue(%s, %q) = %#v %v", c.t, c.s, v, err)
		}
	}
	if _, err := ParseValue(TypeUint8, "300"); err == nil {
		t.Error("300 as uint8 accepted")
	}
}
