package ggufcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
	ollama "github.com/ollama/ollama/fs/ggml"
)

// requireEnv makes the JS reader mandatory (CI sets it): without node or
// js/node_modules the test fails instead of skipping.
const requireEnv = "CKPT_REQUIRE_GGUFCHECK"

// srcTensor is one tensor of the safetensors input.
type srcTensor struct {
	name  string
	dtype string // safetensors dtype: F32 or I32
	shape []int64
}

// The input: 2-D weights whose rows fit every block size, one whose rows
// (96) fit 32-element blocks but not 256 (a K-quant falls back to F16),
// a norm and a 1-D tensor (kept F32) and an integer tensor (kept I32).
var srcTensors = []srcTensor{
	{"token_embd.weight", "F32", []int64{16, 256}},
	{"blk.0.attn_q.weight", "F32", []int64{8, 512}},
	{"blk.0.attn_norm.weight", "F32", []int64{256}},
	{"blk.0.ffn_down.weight", "F32", []int64{4, 96}},
	{"output_norm.weight", "F32", []int64{2, 32}},
	{"bias", "F32", []int64{33}},
	{"positions", "I32", []int64{7}},
}

// writeSafetensors writes srcTensors with random values.
func writeSafetensors(t *testing.T, p string) {
	t.Helper()
	r := rand.New(rand.NewSource(1))
	hdr := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var body []byte
	for _, s := range srcTensors {
		n := int64(1)
		for _, d := range s.shape {
			n *= d
		}
		start := len(body)
		for i := int64(0); i < n; i++ {
			var u uint32
			if s.dtype == "I32" {
				u = uint32(int32(i*7 - 3))
			} else {
				u = math.Float32bits(float32(r.NormFloat64()))
			}
			body = binary.LittleEndian.AppendUint32(body, u)
		}
		hdr[s.name] = map[string]any{"dtype": s.dtype, "shape": s.shape, "data_offsets": []int{start, len(body)}}
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	b.Write(body)
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// metadata is what every file gets: every scalar type, edge values, and
// arrays of every scalar type and of strings, empty ones included.
func metadata() []gguf.KV {
	arr := func(e gguf.ValueType, v any) *gguf.Array { return &gguf.Array{Elem: e, Values: v} }
	return []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"},
		{Key: "general.name", Type: gguf.TypeString, Value: "ggufcheck — ünïcode ✓"},
		{Key: "test.u8", Type: gguf.TypeUint8, Value: uint8(255)},
		{Key: "test.i8", Type: gguf.TypeInt8, Value: int8(-128)},
		{Key: "test.u16", Type: gguf.TypeUint16, Value: uint16(65535)},
		{Key: "test.i16", Type: gguf.TypeInt16, Value: int16(-32768)},
		{Key: "test.u32", Type: gguf.TypeUint32, Value: uint32(4294967295)},
		{Key: "test.i32", Type: gguf.TypeInt32, Value: int32(-2147483648)},
		{Key: "test.u64", Type: gguf.TypeUint64, Value: uint64(18446744073709551615)},
		{Key: "test.i64", Type: gguf.TypeInt64, Value: int64(-9223372036854775808)},
		{Key: "test.f32", Type: gguf.TypeFloat32, Value: float32(1e-5)},
		{Key: "test.f64", Type: gguf.TypeFloat64, Value: 3.141592653589793},
		{Key: "test.true", Type: gguf.TypeBool, Value: true},
		{Key: "test.false", Type: gguf.TypeBool, Value: false},
		{Key: "test.empty_string", Type: gguf.TypeString, Value: ""},
		{Key: "test.arr.u8", Type: gguf.TypeArray, Value: arr(gguf.TypeUint8, []uint8{0, 1, 255})},
		{Key: "test.arr.i8", Type: gguf.TypeArray, Value: arr(gguf.TypeInt8, []int8{-128, 0, 127})},
		{Key: "test.arr.u16", Type: gguf.TypeArray, Value: arr(gguf.TypeUint16, []uint16{0, 65535})},
		{Key: "test.arr.i16", Type: gguf.TypeArray, Value: arr(gguf.TypeInt16, []int16{-32768, 32767})},
		{Key: "test.arr.u32", Type: gguf.TypeArray, Value: arr(gguf.TypeUint32, []uint32{1, 4294967295})},
		{Key: "test.arr.i32", Type: gguf.TypeArray, Value: arr(gguf.TypeInt32, []int32{-1, 2, -2147483648})},
		{Key: "test.arr.u64", Type: gguf.TypeArray, Value: arr(gguf.TypeUint64, []uint64{0, 18446744073709551615})},
		{Key: "test.arr.i64", Type: gguf.TypeArray, Value: arr(gguf.TypeInt64, []int64{-9223372036854775808, 9007199254740993})},
		{Key: "test.arr.f32", Type: gguf.TypeArray, Value: arr(gguf.TypeFloat32, []float32{0.5, -1e30, 1e-7})},
		{Key: "test.arr.f64", Type: gguf.TypeArray, Value: arr(gguf.TypeFloat64, []float64{0.1, -2.5e300})},
		{Key: "test.arr.bool", Type: gguf.TypeArray, Value: arr(gguf.TypeBool, []bool{true, false, true})},
		{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: arr(gguf.TypeString, []string{"<s>", "</s>", "", "▁the", "日本"})},
		{Key: "test.arr.empty", Type: gguf.TypeArray, Value: arr(gguf.TypeInt32, []int32{})},
	}
}

// ggufTypes are the --gguf-type values checked.
var ggufTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}

// wantType is the type llama.cpp's rule gives a tensor (docs/gguf.md),
// worked out here independently of convert's code.
func wantType(s srcTensor, typ string) ggml.Type {
	if s.dtype == "I32" {
		return ggml.I32
	}
	if len(s.shape) == 1 || strings.HasSuffix(s.name, "norm.weight") {
		return ggml.F32
	}
	want, _ := ggml.ParseType(typ)
	if s.shape[len(s.shape)-1]%want.BlockSize() != 0 {
		return ggml.F16
	}
	return want
}

// written is one file ckpt wrote, and what it should hold.
type written struct {
	path string
	typ  string
	kvs  []gguf.KV
}

// writeAll converts the input to one GGUF file per type.
func writeAll(t *testing.T) []written {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	writeSafetensors(t, in)
	var out []written
	for _, typ := range ggufTypes {
		ck, err := statedict.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, typ+".gguf")
		kvs := metadata()
		if _, err := convert.Convert(context.Background(), ck, p, convert.WithFormat(convert.GGUF),
			convert.WithGGUFType(typ), convert.WithGGUFMetadata(kvs...)); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		ck.Close()
		if want, _ := ggml.ParseType(typ); want.Quantized() {
			kvs = append(kvs, gguf.KV{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(2)})
		}
		out = append(out, written{p, typ, kvs})
	}
	return out
}

// ckptView parses a file with ckpt's own reader, for the data offset and
// to compare tensor order.
func ckptView(t *testing.T, p string) *gguf.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	g, err := gguf.Parse(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestOllamaReads: ollama's fs/ggml decoder reads every file ckpt writes
// with the metadata written (same Go types and values, arrays included),
// the tensor names, shapes (ggml order), types by llama.cpp's rule, and
// offsets that follow one another aligned to 32 bytes by ollama's own
// sizes, ending at the end of the file.
func TestOllamaReads(t *testing.T) {
	for _, w := range writeAll(t) {
		t.Run(w.typ, func(t *testing.T) {
			f, err := os.Open(w.path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			st, _ := f.Stat()
			g, err := ollama.Decode(f, -1)
			if err != nil {
				t.Fatalf("ollama: %v", err)
			}
			if g.Length != st.Size() {
				t.Errorf("ollama read %d bytes of a %d-byte file", g.Length, st.Size())
			}
			kv := g.KV()
			for _, e := range w.kvs {
				got, ok := kv[e.Key]
				if !ok {
					t.Errorf("%s: missing", e.Key)
					continue
				}
				if err := sameValue(got, e); err != nil {
					t.Errorf("%s: %v", e.Key, err)
				}
			}
			if n := kv.Len() - 1; n != len(w.kvs) { // ollama adds general.parameter_count
				t.Errorf("ollama has %d entries, %d written", n, len(w.kvs))
			}
			items := g.Tensors().Items()
			mine := ckptView(t, w.path)
			if len(items) != len(srcTensors) || len(mine.Tensors) != len(items) {
				t.Fatalf("ollama has %d tensors, ckpt %d, written %d", len(items), len(mine.Tensors), len(srcTensors))
			}
			if got, want := int64(g.Tensors().Offset), mine.DataOffset; got != want {
				t.Errorf("data offset: ollama %d, ckpt %d", got, want)
			}
			byName := map[string]srcTensor{}
			for _, s := range srcTensors {
				byName[s.name] = s
			}
			next := uint64(0)
			for i, ti := range items {
				s, ok := byName[ti.Name]
				if !ok {
					t.Errorf("unexpected tensor %q", ti.Name)
					continue
				}
				if ti.Name != mine.Tensors[i].Name {
					t.Errorf("tensor %d: ollama %q, ckpt %q", i, ti.Name, mine.Tensors[i].Name)
				}
				wantDims := make([]uint64, len(s.shape))
				for j, d := range s.shape {
					wantDims[len(s.shape)-1-j] = uint64(d)
				}
				if !reflect.DeepEqual(ti.Shape, wantDims) {
					t.Errorf("%s: shape %v, want %v", ti.Name, ti.Shape, wantDims)
				}
				if want := wantType(s, w.typ); ti.Kind != uint32(want) {
					t.Errorf("%s: type %d (%s), want %d (%s)", ti.Name, ti.Kind, ti.Type(), uint32(want), want)
				}
				if ti.Offset != next {
					t.Errorf("%s: offset %d, want %d", ti.Name, ti.Offset, next)
				}
				next = (ti.Offset + ti.Size() + 31) / 32 * 32
				if rb, _ := ggml.Type(ti.Kind).RowBytes(int64(ti.Elements())); uint64(rb) != ti.Size() {
					t.Errorf("%s: ollama's size %d, ckpt's %d", ti.Name, ti.Size(), rb)
				}
			}
		})
	}
}

// sameValue compares a value ollama decoded with the entry written: the
// same Go type (arrays: ollama's array of the same element type) and value.
func sameValue(got any, e gguf.KV) error {
	if a, ok := e.Value.(*gguf.Array); ok {
		want := reflect.TypeOf(a.Values).Elem().String()
		if gt := fmt.Sprintf("%T", got); !strings.HasSuffix(gt, "["+want+"]") {
			return fmt.Errorf("array type %s, want elements of %s", gt, want)
		}
		gj, err := json.Marshal(got)
		if err != nil {
			return err
		}
		wj, _ := json.Marshal(a.Values)
		if !bytes.Equal(gj, wj) {
			return fmt.Errorf("array %s, want %s", gj, wj)
		}
		return nil
	}
	if reflect.TypeOf(got) != reflect.TypeOf(e.Value) || got != e.Value {
		return fmt.Errorf("%T %v, want %T %v", got, got, e.Value, e.Value)
	}
	return nil
}

// jsFile is what js/read.mjs prints for one file.
type jsFile struct {
	File         string `json:"file"`
	LittleEndian bool   `json:"little_endian"`
	DataOffset   string `json:"tensor_data_offset"`
	Metadata     map[string]struct {
		Type    int             `json:"type"`
		SubType *int            `json:"sub_type"`
		Value   json.RawMessage `json:"value"`
	} `json:"metadata"`
	Tensors []struct {
		Name   string   `json:"name"`
		Shape  []string `json:"shape"`
		DType  int      `json:"dtype"`
		Offset string   `json:"offset"`
	} `json:"tensors"`
}

// TestHuggingFaceReads: @huggingface/gguf (js/, pinned in package.json)
// reads every file with the metadata written (value types, element types
// and values; 64-bit integers exactly) and the tensor infos ckpt's own
// reader sees. It needs node and `npm ci` in js/; it skips without them
// unless CKPT_REQUIRE_GGUFCHECK=1.
func TestHuggingFaceReads(t *testing.T) {
	files := writeAll(t)
	var paths []string
	for _, w := range files {
		paths = append(paths, w.path)
	}
	lines := runJS(t, paths...)
	for i, w := range files {
		got := lines[i]
		mine := ckptView(t, w.path)
		if !got.LittleEndian || got.DataOffset != strconv.FormatInt(mine.DataOffset, 10) {
			t.Errorf("%s: little endian %v, data offset %s, want %d", w.typ, got.LittleEndian, got.DataOffset, mine.DataOffset)
		}
		seen := map[string]bool{"version": true, "tensor_count": true, "kv_count": true}
		for _, e := range w.kvs {
			seen[e.Key] = true
			m, ok := got.Metadata[e.Key]
			if !ok {
				t.Errorf("%s: %s missing", w.typ, e.Key)
				continue
			}
			if m.Type != int(e.Type) {
				t.Errorf("%s: %s: type %d, want %d", w.typ, e.Key, m.Type, e.Type)
			}
			if a, ok := e.Value.(*gguf.Array); ok && (m.SubType == nil || *m.SubType != int(a.Elem)) {
				t.Errorf("%s: %s: element type %v, want %d", w.typ, e.Key, m.SubType, a.Elem)
			}
			if err := sameJSON(m.Value, e.Value); err != nil {
				t.Errorf("%s: %s: %v", w.typ, e.Key, err)
			}
		}
		for k := range got.Metadata {
			if !seen[k] {
				t.Errorf("%s: unexpected entry %s", w.typ, k)
			}
		}
		if len(got.Tensors) != len(mine.Tensors) {
			t.Fatalf("%s: %d tensors, ckpt wrote %d", w.typ, len(got.Tensors), len(mine.Tensors))
		}
		for j, ti := range mine.Tensors {
			g := got.Tensors[j]
			var shape []string
			for _, d := range ti.Dims {
				shape = append(shape, strconv.FormatUint(d, 10))
			}
			if g.Name != ti.Name || !reflect.DeepEqual(g.Shape, shape) || g.DType != int(ti.Type) || g.Offset != strconv.FormatUint(ti.Offset, 10) {
				t.Errorf("%s: tensor %d: %+v, want %s %v type %d offset %d", w.typ, j, g, ti.Name, shape, ti.Type, ti.Offset)
			}
		}
	}
}

// runJS runs js/read.mjs on files: one result per file, in order. It
// skips t without node or js/node_modules, unless CKPT_REQUIRE_GGUFCHECK=1.
func runJS(t *testing.T, files ...string) []jsFile {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join("js", "node_modules", "@huggingface", "gguf", "package.json"))
	}
	if err != nil {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s=1 but the JS reader cannot run (node, and `npm ci` in internal/ggufcheck/js): %v", requireEnv, err)
		}
		t.Skipf("JS reader not installed (node; npm ci in internal/ggufcheck/js): %v", err)
	}
	cmd := exec.Command(node, append([]string{filepath.Join("js", "read.mjs")}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(files) {
		t.Fatalf("%d results for %d files:\n%s", len(lines), len(files), out)
	}
	res := make([]jsFile, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &res[i]); err != nil {
			t.Fatalf("%s: %v", files[i], err)
		}
	}
	return res
}

// sameJSON compares a value as js/read.mjs printed it (numbers, 64-bit
// integers as strings, arrays) with the value written.
func sameJSON(raw json.RawMessage, v any) error {
	if a, ok := v.(*gguf.Array); ok {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return err
		}
		rv := reflect.ValueOf(a.Values)
		if len(elems) != rv.Len() {
			return fmt.Errorf("%d elements, want %d", len(elems), rv.Len())
		}
		for i := range elems {
			if err := sameJSON(elems[i], rv.Index(i).Interface()); err != nil {
				return fmt.Errorf("[%d]: %v", i, err)
			}
		}
		return nil
	}
	var want string
	switch x := v.(type) {
	case uint64:
		want = strconv.Quote(strconv.FormatUint(x, 10))
	case int64:
		want = strconv.Quote(strconv.FormatInt(x, 10))
	case float32, float64:
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return err
		}
		w := reflect.ValueOf(x).Float()
		if f != w {
			return fmt.Errorf("%v, want %v", f, w)
		}
		return nil
	default:
		b, _ := json.Marshal(x)
		want = string(b)
	}
	var got any
	json.Unmarshal(raw, &got)
	var wantV any
	json.Unmarshal([]byte(want), &wantV)
	if !reflect.DeepEqual(got, wantV) {
		return fmt.Errorf("%s, want %s", raw, want)
	}
	return nil
}
