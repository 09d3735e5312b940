package ggufcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/internal/ggmlref"
	"github.com/ckpt-dev/ckpt/statedict"
	ollama "github.com/ollama/ollama/fs/ggml"
)

// quantRelease is a quantized release written as its upstream tool
// saves it, and the GGUF ckpt makes of it.
type quantRelease struct {
	name, config string
	tensors      []stTensor
	ggufType     string
	weight       string    // the dequantized weight checked
	stored       []int64   // its shape in the GGUF (C order)
	typ          ggml.Type // its ggml type there
}

type stTensor struct {
	name, dtype string
	shape       []int64
	data        []byte
}

func writeRelease(t *testing.T, dir string, r quantRelease) {
	t.Helper()
	hdr := map[string]any{}
	var body []byte
	for _, x := range r.tensors {
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(body), len(body) + len(x.data)}}
		body = append(body, x.data...)
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	b.Write(body)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(r.config), 0o644); err != nil {
		t.Fatal(err)
	}
}

func randBytes(r *rand.Rand, n int, ok func(byte) bool) []byte {
	b := make([]byte, n)
	for i := range b {
		for b[i] = byte(r.Intn(256)); !ok(b[i]); b[i] = byte(r.Intn(256)) {
		}
	}
	return b
}

func le32(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// quantReleases: DeepSeek block FP8 (96x64 in 32x32 blocks, ragged rows
// of 80) to q8_0, and gpt-oss MXFP4 experts [2, 8, 2, 16] copied.
func quantReleases() []quantRelease {
	r := rand.New(rand.NewSource(32))
	sinv := make([]float32, 3*2)
	for i := range sinv {
		sinv[i] = float32(math.Ldexp(1+r.Float64(), -r.Intn(10)))
	}
	scales := randBytes(r, 2*8*2, func(b byte) bool { return b >= 100 && b < 150 })
	return []quantRelease{
		{name: "fp8 block", ggufType: "q8_0", weight: "model.layers.0.mlp.up_proj.weight", stored: []int64{80, 64}, typ: ggml.Q8_0,
			config: `{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [32, 32]}}`,
			tensors: []stTensor{{"model.layers.0.mlp.up_proj.weight", "F8_E4M3", []int64{80, 64}, randBytes(r, 80*64, func(b byte) bool { return b&0x7f != 0x7f })},
				{"model.layers.0.mlp.up_proj.weight_scale_inv", "F32", []int64{3, 2}, le32(sinv)}}},
		{name: "mxfp4", weight: "model.layers.0.mlp.experts.down_proj", stored: []int64{2, 8, 64}, typ: ggml.MXFP4,
			config: `{"torch_dtype": "float32", "quantization_config": {"quant_method": "mxfp4"}}`,
			tensors: []stTensor{{"model.layers.0.mlp.experts.down_proj_blocks", "U8", []int64{2, 8, 2, 16}, randBytes(r, 2*8*2*16, func(byte) bool { return true })},
				{"model.layers.0.mlp.experts.down_proj_scales", "U8", []int64{2, 8, 2}, scales}}},
	}
}

// ckptValues reads the release's dequantized weight as ckpt reads it, in
// float32, in the GGUF's orientation (MXFP4: transformers' [E, K, R]
// transposed back to the stored [E, R, K]).
func ckptValues(t *testing.T, dir string, q quantRelease) []float32 {
	t.Helper()
	ck, err := statedict.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	tt := ck.Tensor(q.weight)
	b, err := tt.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, tt.NumEl())
	for i := range v {
		if tt.DType.Size() == 2 { // bfloat16
			v[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		} else {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	if q.typ != ggml.MXFP4 {
		return v
	}
	e, k, r := int(tt.Shape[0]), int(tt.Shape[1]), int(tt.Shape[2])
	out := make([]float32, len(v))
	for x := 0; x < e; x++ {
		for i := 0; i < r; i++ {
			for j := 0; j < k; j++ {
				out[(x*r+i)*k+j] = v[(x*k+j)*r+i]
			}
		}
	}
	return out
}

// TestQuantizedReleases: GGUF files ckpt writes from a block-FP8 release
// (--gguf-type q8_0) and a gpt-oss MXFP4 one (blocks copied) are read by
// ollama's fs/ggml and @huggingface/gguf with the types, shapes and
// aligned offsets written, no scale tensor among them; against ggml's
// own C (ggml-quants.c, internal/ggmlref): the Q8_0 blocks are
// byte-identical to quantize_row_q8_0_ref run on ckpt's dequantized
// values, the MXFP4 blocks dequantize (dequantize_row_mxfp4) to ckpt's
// MXFP4 values (transformers', quant/mxfp4_test.go) but for the sign of
// zero (ggml's int8 table has no -0), and ggml_validate_row_data accepts
// every block.
func TestQuantizedReleases(t *testing.T) {
	ref := ggmlref.Build(t)
	var paths []string
	var rels []quantRelease
	for _, q := range quantReleases() {
		dir := t.TempDir()
		writeRelease(t, dir, q)
		ck, err := statedict.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out.gguf")
		opts := []convert.Option{convert.WithFormat(convert.GGUF),
			convert.WithGGUFMetadata(gguf.KV{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"})}
		if q.ggufType != "" {
			opts = append(opts, convert.WithGGUFType(q.ggufType))
		}
		_, err = convert.Convert(context.Background(), ck, out, opts...)
		ck.Close()
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		paths, rels = append(paths, out), append(rels, q)

		mine := ckptView(t, out)
		if len(mine.Tensors) != 1 || mine.Tensors[0].Name != q.weight {
			t.Fatalf("%s: tensors %+v, want %s alone (companions consumed)", q.name, mine.Tensors, q.weight)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		ti := mine.Tensors[0]
		data := b[mine.DataOffset+int64(ti.Offset):][:ti.Size]
		want := ckptValues(t, filepath.Dir(out), q)
		switch q.typ {
		case ggml.Q8_0:
			if !bytes.Equal(data, ref.Quantize(t, uint32(ggml.Q8_0), want)) {
				t.Errorf("%s: q8_0 blocks differ from ggml's C quantizer on ckpt's values", q.name)
			}
		case ggml.MXFP4:
			got := ref.Dequantize(t, uint32(ggml.MXFP4), data, len(want))
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] == 0 && want[i] == 0) {
					t.Fatalf("%s: [%d]: ggml's C %g, ckpt %g", q.name, i, got[i], want[i])
				}
			}
		}
		nb := int(ti.Size / int64(q.typ.TypeSize()))
		for i, ok := range ref.Valid(t, uint32(q.typ), data, nb) {
			if !ok {
				t.Errorf("%s: ggml_validate_row_data refuses block %d", q.name, i)
			}
		}

		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		g, err := ollama.Decode(f, -1)
		f.Close()
		if err != nil {
			t.Fatalf("%s: ollama: %v", q.name, err)
		}
		items := g.Tensors().Items()
		wantDims := make([]uint64, len(q.stored))
		for j, d := range q.stored {
			wantDims[len(q.stored)-1-j] = uint64(d)
		}
		if len(items) != 1 || items[0].Name != q.weight || items[0].Kind != uint32(q.typ) || !reflect.DeepEqual(items[0].Shape, wantDims) ||
			items[0].Offset != 0 || items[0].Size() != uint64(ti.Size) || g.Length != int64(len(b)) || int64(g.Tensors().Offset)%32 != 0 {
			t.Errorf("%s: ollama reads %+v (length %d of %d)", q.name, items, g.Length, len(b))
		}
	}
	for i, got := range runJS(t, paths...) {
		q := rels[i]
		var shape []string
		for j := len(q.stored) - 1; j >= 0; j-- {
			shape = append(shape, strconv.FormatInt(q.stored[j], 10))
		}
		if len(got.Tensors) != 1 || got.Tensors[0].Name != q.weight || got.Tensors[0].DType != int(q.typ) || !reflect.DeepEqual(got.Tensors[0].Shape, shape) {
			t.Errorf("%s: @huggingface/gguf reads %+v", q.name, got.Tensors)
		}
	}
}
