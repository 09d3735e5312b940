package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/safetensors"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

func randFloats(n int, seed int64) []float32 {
	r := rand.New(rand.NewSource(seed))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func quant(t *testing.T, typ ggml.Type, v []float32) []byte {
	n, _ := typ.RowBytes(int64(len(v)))
	b := make([]byte, n)
	if err := ggml.Quantize(typ, v, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// ggufFixture writes a small llama-like GGUF: F32 norm, F16 and Q8_0 and
// Q4_K weights, metadata with a tokenizer array.
func ggufFixture(t *testing.T, dir string) string {
	t.Helper()
	f16 := make([]byte, 2*64*2)
	for i, x := range randFloats(128, 4) {
		binary.LittleEndian.PutUint16(f16[2*i:], dtype.F32ToF16(x))
	}
	tensors := []struct {
		spec gguf.TensorSpec
		data []byte
	}{
		{gguf.TensorSpec{Name: "token_embd.weight", Dims: []uint64{256, 2}, Type: ggml.Q4_K}, quant(t, ggml.Q4_K, randFloats(512, 1))},
		{gguf.TensorSpec{Name: "blk.0.attn_norm.weight", Dims: []uint64{64}, Type: ggml.F32}, f32bytes(randFloats(64, 2))},
		{gguf.TensorSpec{Name: "blk.0.attn_q.weight", Dims: []uint64{64, 3}, Type: ggml.Q8_0}, quant(t, ggml.Q8_0, randFloats(192, 3))},
		{gguf.TensorSpec{Name: "blk.0.ffn_up.weight", Dims: []uint64{64, 2}, Type: ggml.F16}, f16},
	}
	var specs []gguf.TensorSpec
	for _, x := range tensors {
		specs = append(specs, x.spec)
	}
	var b bytes.Buffer
	w, err := gguf.NewWriter(&b, []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"},
		{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(2)},
		{Key: "llama.embedding_length", Type: gguf.TypeUint32, Value: uint32(64)},
		{Key: "llama.rope.freq_base", Type: gguf.TypeFloat32, Value: float32(10000)},
		{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: &gguf.Array{Elem: gguf.TypeString, Values: []string{"<s>", "</s>", "a"}}},
	}, specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range tensors {
		if err := w.WriteTensor(bytes.NewReader(x.data)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	p := filepath.Join(dir, "in.gguf")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func parseGGUF(t *testing.T, p string) (*gguf.File, []byte) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f, b
}

func tensorData(f *gguf.File, b []byte, name string) []byte {
	for _, ti := range f.Tensors {
		if ti.Name == name {
			o := f.DataOffset + int64(ti.Offset)
			return b[o : o+ti.Size]
		}
	}
	return nil
}

// TestConvertGGUF: GGUF to safetensors dequantizes by ggml's rules (f32,
// or --dtype); the safetensors output keeps the GGUF header, and a GGUF
// written back from it is byte-identical when nothing was quantized; GGUF
// to GGUF copies quantized blocks bit for bit; safetensors to GGUF with
// --gguf-type quantizes 2-D weights as ggml's reference does and keeps
// 1-D tensors F32.
func TestConvertGGUF(t *testing.T) {
	dir := t.TempDir()
	in := ggufFixture(t, dir)
	inF, inB := parseGGUF(t, in)

	st := filepath.Join(dir, "out.safetensors")
	if code, out, errs := runCLI(t, "convert", in, st); code != exitOK {
		t.Fatalf("gguf -> safetensors: exit %d %s %s", code, out, errs)
	}
	ck, err := statedict.Open(st)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range inF.Tensors {
		got, err := ck.Tensor(ti.Name).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		raw := tensorData(inF, inB, ti.Name)
		if ti.Type == ggml.F16 {
			if !bytes.Equal(got, raw) {
				t.Errorf("%s: f16 not copied bit for bit", ti.Name)
			}
			continue
		}
		ref := make([]float32, ti.NumEl())
		if err := ggml.Dequantize(ti.Type, raw, ref); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f32bytes(ref)) {
			t.Errorf("%s (%s): safetensors bytes differ from ggml's dequantization", ti.Name, ti.Type)
		}
		if tt := ck.Tensor(ti.Name); tt.DType != dtype.Float32 || len(tt.Shape) != len(ti.Dims) || tt.Shape[0] != int64(ti.Dims[len(ti.Dims)-1]) {
			t.Errorf("%s: %s %v", ti.Name, tt.DType, tt.Shape)
		}
	}
	ck.Close()

	// GGUF -> GGUF: blocks copied, file identical.
	back := filepath.Join(dir, "copy.gguf")
	if code, out, errs := runCLI(t, "convert", in, back); code != exitOK {
		t.Fatalf("gguf -> gguf: exit %d %s %s", code, out, errs)
	}
	if _, b := parseGGUF(t, back); !bytes.Equal(b, inB) {
		t.Errorf("gguf -> gguf is not byte-identical")
	}

	// An unquantized GGUF -> safetensors -> GGUF round trip is byte-identical.
	plain := filepath.Join(dir, "plain.gguf")
	if code, out, errs := runCLI(t, "convert", in, plain, "--gguf-type", "f16"); code != exitOK {
		t.Fatalf("gguf -> f16 gguf: exit %d %s %s", code, out, errs)
	}
	pf, pb := parseGGUF(t, plain)
	for _, ti := range pf.Tensors {
		want := ggml.F16
		if len(ti.Dims) == 1 {
			want = ggml.F32
		}
		if ti.Type != want {
			t.Errorf("--gguf-type f16: %s is %s, want %s", ti.Name, ti.Type, want)
		}
	}
	st2 := filepath.Join(dir, "plain.safetensors")
	rt := filepath.Join(dir, "roundtrip.gguf")
	for _, args := range [][]string{{"convert", plain, st2}, {"convert", st2, rt}} {
		if code, out, errs := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d %s %s", args, code, out, errs)
		}
	}
	if _, b := parseGGUF(t, rt); !bytes.Equal(b, pb) {
		t.Errorf("gguf -> safetensors -> gguf is not byte-identical (%d vs %d bytes)", len(b), len(pb))
	}

	// safetensors without a GGUF header -> q8_0 GGUF: architecture required.
	raw := filepath.Join(dir, "raw.safetensors")
	w := randFloats(3*64, 9)
	norm := randFloats(64, 10)
	writeSafetensorsF32(t, raw, map[string][]float32{"w": w, "norm": norm}, map[string][]int64{"w": {3, 64}, "norm": {64}})
	q := filepath.Join(dir, "q.gguf")
	if code, _, errs := runCLI(t, "convert", raw, q, "--gguf-type", "q8_0"); code != exitUsage && code != exitError || errs == "" {
		t.Errorf("no architecture: exit %d %q", code, errs)
	}
	if code, out, errs := runCLI(t, "convert", raw, q, "--gguf-type", "q8_0", "--gguf-meta", "general.architecture=llama", "--gguf-meta", "llama.block_count=1"); code != exitOK {
		t.Fatalf("safetensors -> q8_0: exit %d %s %s", code, out, errs)
	}
	qf, qb := parseGGUF(t, q)
	types := map[string]ggml.Type{}
	for _, ti := range qf.Tensors {
		types[ti.Name] = ti.Type
	}
	if types["w"] != ggml.Q8_0 || types["norm"] != ggml.F32 {
		t.Errorf("types %v", types)
	}
	if !bytes.Equal(tensorData(qf, qb, "w"), quant(t, ggml.Q8_0, w)) {
		t.Errorf("q8_0 bytes differ from ggml.Quantize")
	}
	if kv, ok := qf.Get("llama.block_count"); !ok || kv.Value != uint32(1) {
		t.Errorf("llama.block_count: %+v", kv)
	}
	if kv, ok := qf.Get("general.quantization_version"); !ok || kv.Value != uint32(2) {
		t.Errorf("general.quantization_version: %+v", kv)
	}
}

// writeSafetensorsF32 writes float32 tensors with the given shapes
// through package safetensors' writer.
func writeSafetensorsF32(t *testing.T, p string, data map[string][]float32, shapes map[string][]int64) {
	t.Helper()
	var decl []safetensors.WriterTensor
	for name := range data {
		decl = append(decl, safetensors.WriterTensor{Name: name, DType: "F32", Shape: shapes[name]})
	}
	var b bytes.Buffer
	w, err := safetensors.NewWriter(&b, decl, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, wt := range w.Order() {
		if _, err := w.WriteTensor(wt.Name, bytes.NewReader(f32bytes(data[wt.Name]))); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
