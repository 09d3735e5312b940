//go:build ignore

// gen_gguf_fixture writes testdata/fixtures/tiny.gguf: a small llama-like
// GGUF with F32, F16, BF16, Q8_0, Q4_K, Q6_K and IQ2_XXS tensors and
// metadata of several types, quantized by package ggml (ggml's reference
// quantizer, bit for bit) from fixed pseudo-random weights. IQ2_XXS has no
// quantizer here; its blocks are random bytes with a finite scale, which
// every reader decodes the same way. Run from the module root:
//
//	go run scripts/gen_gguf_fixture.go
package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"os"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
)

func main() {
	r := rand.New(rand.NewSource(42))
	floats := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * 0.02)
		}
		return v
	}
	enc := func(t ggml.Type, v []float32) []byte {
		n, err := t.RowBytes(int64(len(v)))
		if err != nil {
			panic(err)
		}
		b := make([]byte, n)
		if err := ggml.Quantize(t, v, b); err != nil {
			panic(err)
		}
		return b
	}
	iq := make([]byte, 2*ggml.IQ2_XXS.TypeSize())
	r.Read(iq)
	for i := 0; i < 2; i++ { // a finite fp16 scale at the start of each block
		binary.LittleEndian.PutUint16(iq[i*int(ggml.IQ2_XXS.TypeSize()):], dtype.F32ToF16(0.01))
	}
	type tensor struct {
		spec gguf.TensorSpec
		data []byte
	}
	ts := []tensor{
		{gguf.TensorSpec{Name: "token_embd.weight", Dims: []uint64{256, 4}, Type: ggml.Q4_K}, enc(ggml.Q4_K, floats(1024))},
		{gguf.TensorSpec{Name: "blk.0.attn_norm.weight", Dims: []uint64{256}, Type: ggml.F32}, enc(ggml.F32, floats(256))},
		{gguf.TensorSpec{Name: "blk.0.attn_q.weight", Dims: []uint64{256, 2}, Type: ggml.Q8_0}, enc(ggml.Q8_0, floats(512))},
		{gguf.TensorSpec{Name: "blk.0.attn_k.weight", Dims: []uint64{256, 2}, Type: ggml.Q6_K}, enc(ggml.Q6_K, floats(512))},
		{gguf.TensorSpec{Name: "blk.0.attn_v.weight", Dims: []uint64{256, 2}, Type: ggml.IQ2_XXS}, iq},
		{gguf.TensorSpec{Name: "blk.0.ffn_up.weight", Dims: []uint64{8, 4}, Type: ggml.F16}, enc(ggml.F16, floats(32))},
		{gguf.TensorSpec{Name: "output.weight", Dims: []uint64{8, 4}, Type: ggml.BF16}, enc(ggml.BF16, floats(32))},
	}
	var specs []gguf.TensorSpec
	for _, t := range ts {
		specs = append(specs, t.spec)
	}
	var b bytes.Buffer
	w, err := gguf.NewWriter(&b, []gguf.KV{
		{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"},
		{Key: "general.name", Type: gguf.TypeString, Value: "tiny"},
		{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(2)},
		{Key: "llama.block_count", Type: gguf.TypeUint32, Value: uint32(1)},
		{Key: "llama.embedding_length", Type: gguf.TypeUint32, Value: uint32(256)},
		{Key: "llama.rope.freq_base", Type: gguf.TypeFloat32, Value: float32(10000)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Type: gguf.TypeFloat32, Value: float32(1e-5)},
		{Key: "tokenizer.ggml.model", Type: gguf.TypeString, Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Type: gguf.TypeArray, Value: &gguf.Array{Elem: gguf.TypeString, Values: []string{"<unk>", "<s>", "</s>", "a", "b"}}},
		{Key: "tokenizer.ggml.scores", Type: gguf.TypeArray, Value: &gguf.Array{Elem: gguf.TypeFloat32, Values: []float32{0, 0, 0, -1, float32(math.Inf(-1))}}},
		{Key: "tokenizer.ggml.bos_token_id", Type: gguf.TypeUint32, Value: uint32(1)},
	}, specs)
	if err != nil {
		panic(err)
	}
	for _, t := range ts {
		if err := w.WriteTensor(bytes.NewReader(t.data)); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	if err := os.WriteFile("testdata/fixtures/tiny.gguf", b.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
