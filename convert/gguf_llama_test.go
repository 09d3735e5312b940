package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// tinyLlama is a Hugging Face Llama of 2 layers, 4 heads of 16 and 2
// key/value heads (grouped-query attention), q/k biases on layer 0, and a
// rotary inv_freq buffer llama.cpp has no name for.
type tinyLlama struct {
	names  []string
	shapes map[string][]int64
	data   map[string][]float32
}

func newTinyLlama() *tinyLlama {
	m := &tinyLlama{shapes: map[string][]int64{}, data: map[string][]float32{}}
	r := rand.New(rand.NewSource(7))
	add := func(name string, shape ...int64) {
		n := int64(1)
		for _, s := range shape {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		m.names = append(m.names, name)
		m.shapes[name], m.data[name] = shape, v
	}
	add("model.embed_tokens.weight", 32, 64)
	for l := range 2 {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"self_attn.q_proj.weight", 64, 64)
		add(p+"self_attn.k_proj.weight", 32, 64)
		add(p+"self_attn.v_proj.weight", 32, 64)
		add(p+"self_attn.o_proj.weight", 64, 64)
		if l == 0 {
			add(p+"self_attn.q_proj.bias", 64)
			add(p+"self_attn.k_proj.bias", 32)
		}
		add(p+"mlp.gate_proj.weight", 96, 64)
		add(p+"mlp.up_proj.weight", 96, 64)
		add(p+"mlp.down_proj.weight", 64, 96)
		add(p+"input_layernorm.weight", 64)
		add(p+"post_attention_layernorm.weight", 64)
	}
	add("model.layers.0.self_attn.rotary_emb.inv_freq", 8)
	add("model.norm.weight", 64)
	add("lm_head.weight", 32, 64)
	return m
}

const tinyLlamaConfig = `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
 "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,
 "max_position_embeddings": 256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "vocab_size": 32,
 "torch_dtype": "float32", "attention_bias": true}`

// write writes model.safetensors (float32) and config.json into dir.
func (m *tinyLlama) write(t *testing.T, dir, config string) { m.writeAs(t, dir, config, "F32") }

// writeAs writes the tensors as F32 or BF16 (the float32 values
// truncated, which the tests then expect).
func (m *tinyLlama) writeAs(t *testing.T, dir, config, dtype string) {
	t.Helper()
	hdr := map[string]any{}
	var body []byte
	for _, n := range m.names {
		start := len(body)
		for i, f := range m.data[n] {
			if dtype == "BF16" {
				f = math.Float32frombits(math.Float32bits(f) &^ 0xffff)
				m.data[n][i] = f
				body = binary.LittleEndian.AppendUint16(body, uint16(math.Float32bits(f)>>16))
				continue
			}
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(f))
		}
		hdr[n] = map[string]any{"dtype": dtype, "shape": m.shapes[n], "data_offsets": []int{start, len(body)}}
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	b.Write(body)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// permuteRef is llama.cpp's permutation written out as index arithmetic:
// output row h*hd + 2*i + j is input row h*hd + j*hd/2 + i.
func permuteRef(v []float32, rows, heads int) []float32 {
	cols := len(v) / rows
	hd := rows / heads
	out := make([]float32, len(v))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				copy(out[(h*hd+2*i+j)*cols:][:cols], v[(h*hd+j*hd/2+i)*cols:][:cols])
			}
		}
	}
	return out
}

func readGGUFFile(t *testing.T, p string) (*gguf.File, []byte) {
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

func ggufData(f *gguf.File, b []byte, name string) []byte {
	for _, ti := range f.Tensors {
		if ti.Name == name {
			o := f.DataOffset + int64(ti.Offset)
			return b[o : o+ti.Size]
		}
	}
	return nil
}

func f32le(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func convertTiny(t *testing.T, dir string, opts ...Option) (*Summary, string) {
	t.Helper()
	ck, err := statedict.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "out.gguf")
	sum, err := Convert(context.Background(), ck, out, append([]Option{WithFormat(GGUF), WithHFModelDir(dir)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return sum, out
}

// TestGGUFLlama: a Hugging Face Llama directory written as GGUF gets
// llama.cpp's tensor names, its q/k permutation (n_head for q, n_head_kv
// for k, biases too; checked against index arithmetic and, where Python
// has numpy, against numpy's reshape/swapaxes), the llama.* keys of
// config.json, and notes for the missing tokenizer and the unmapped
// tensor; --gguf-meta entries replace derived ones.
func TestGGUFLlama(t *testing.T) {
	dir := t.TempDir()
	m := newTinyLlama()
	m.write(t, dir, tinyLlamaConfig)
	sum, out := convertTiny(t, dir, WithGGUFMetadata(gguf.KV{Key: "general.name", Type: gguf.TypeString, Value: "tiny"}))
	f, b := readGGUFFile(t, out)

	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	for _, want := range []string{"token_embd.weight", "output_norm.weight", "output.weight", "blk.0.attn_q.weight", "blk.0.attn_q.bias",
		"blk.0.attn_k.weight", "blk.0.attn_k.bias", "blk.1.attn_v.weight", "blk.1.attn_output.weight", "blk.0.ffn_gate.weight",
		"blk.1.ffn_up.weight", "blk.1.ffn_down.weight", "blk.0.attn_norm.weight", "blk.1.ffn_norm.weight",
		"model.layers.0.self_attn.rotary_emb.inv_freq"} {
		if !slices.Contains(names, want) {
			t.Errorf("no tensor %s in %v", want, names)
		}
	}
	if len(names) != len(m.names) {
		t.Errorf("%d tensors, want %d", len(names), len(m.names))
	}
	// Unpermuted tensors are copied as they are; q/k are permuted.
	perm := map[string]int{"self_attn.q_proj": 4, "self_attn.k_proj": 2}
	for _, n := range m.names {
		out := strings.NewReplacer("model.layers.", "blk.", "self_attn.q_proj", "attn_q", "self_attn.k_proj", "attn_k",
			"self_attn.v_proj", "attn_v", "self_attn.o_proj", "attn_output", "mlp.gate_proj", "ffn_gate", "mlp.up_proj", "ffn_up",
			"mlp.down_proj", "ffn_down", "post_attention_layernorm", "ffn_norm", "input_layernorm", "attn_norm").Replace(n)
		switch n {
		case "model.embed_tokens.weight":
			out = "token_embd.weight"
		case "model.norm.weight":
			out = "output_norm.weight"
		case "lm_head.weight":
			out = "output.weight"
		case "model.layers.0.self_attn.rotary_emb.inv_freq":
			out = n
		}
		want := m.data[n]
		for k, heads := range perm {
			if strings.Contains(n, k) {
				want = permuteRef(want, int(m.shapes[n][0]), heads)
			}
		}
		if got := ggufData(f, b, out); !bytes.Equal(got, f32le(want)) {
			t.Errorf("%s (%s): data differs from llama.cpp's permutation/copy", out, n)
		}
	}
	for _, ti := range f.Tensors {
		if ti.Name == "blk.0.attn_k.weight" && !slices.Equal(ti.Dims, []uint64{64, 32}) {
			t.Errorf("attn_k dims %v, want [64 32]", ti.Dims)
		}
		if ti.Name == "blk.0.attn_q.bias" && (!slices.Equal(ti.Dims, []uint64{64}) || ti.Type != ggml.F32) {
			t.Errorf("attn_q.bias %v %s", ti.Dims, ti.Type)
		}
	}

	wantKV := map[string]any{
		"general.architecture": "llama", "general.name": "tiny",
		"llama.context_length": uint32(256), "llama.embedding_length": uint32(64), "llama.block_count": uint32(2),
		"llama.feed_forward_length": uint32(96), "llama.attention.head_count": uint32(4), "llama.attention.head_count_kv": uint32(2),
		"llama.rope.freq_base": float32(500000), "llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"llama.rope.dimension_count": uint32(16), "llama.vocab_size": uint32(32), "tokenizer.ggml.model": "none",
	}
	for k, v := range wantKV {
		kv, ok := f.Get(k)
		if !ok || kv.Value != v {
			t.Errorf("%s = %#v, want %#v", k, kv.Value, v)
		}
	}
	if _, ok := f.Get("general.file_type"); ok {
		t.Errorf("general.file_type written without --gguf-type")
	}
	r := sum.GGUF
	if r == nil || !r.Mapped || r.Architecture != "llama" || r.Permuted != 4+2 || r.Tokenizer {
		t.Fatalf("report %+v", r)
	}
	notes := strings.Join(r.Notes, "\n")
	if !strings.Contains(notes, "no tokenizer") || !strings.Contains(notes, "rotary_emb.inv_freq") {
		t.Errorf("notes %q", notes)
	}

	// numpy's reshape/swapaxes, as llama.cpp's permute, on the same input.
	t.Run("numpy", func(t *testing.T) {
		testenv.Require(t, "numpy")
		ref := filepath.Join(t.TempDir(), "ref.bin")
		script := `
import json, struct, sys
import numpy as np
src, out = sys.argv[1], sys.argv[2]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
def get(name):
    e = hdr[name]
    s, t = e["data_offsets"]
    return np.frombuffer(b[8 + n + s:8 + n + t], dtype="<f4").reshape(e["shape"])
def permute(w, n_head):
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
with open(out, "wb") as f:
    for l in range(2):
        for p, h in (("q", 4), ("k", 2)):
            for kind in ("weight", "bias"):
                name = "model.layers.%d.self_attn.%s_proj.%s" % (l, p, kind)
                if name in hdr:
                    f.write(np.ascontiguousarray(permute(get(name), h)).astype("<f4").tobytes())
`
		if o, err := exec.Command(testenv.Python(), "-c", script, filepath.Join(dir, "model.safetensors"), ref).CombinedOutput(); err != nil {
			t.Fatalf("python: %v\n%s", err, o)
		}
		want, err := os.ReadFile(ref)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for l := range 2 {
			for _, p := range []string{"q", "k"} {
				for _, kind := range []string{"weight", "bias"} {
					got = append(got, ggufData(f, b, fmt.Sprintf("blk.%d.attn_%s.%s", l, p, kind))...)
				}
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("q/k data differs from numpy's permutation (%d vs %d bytes)", len(got), len(want))
		}
	})
}

// TestGGUFLlamaQuantized: with --gguf-type q8_0 the permuted q/k rows are
// quantized as ggml's reference quantizes the permuted rows, and
// general.file_type is llama.cpp's MOSTLY_Q8_0 (7).
func TestGGUFLlamaQuantized(t *testing.T) {
	dir := t.TempDir()
	m := newTinyLlama()
	m.write(t, dir, tinyLlamaConfig)
	_, out := convertTiny(t, dir, WithGGUFType("q8_0"))
	f, b := readGGUFFile(t, out)
	want := permuteRef(m.data["model.layers.1.self_attn.k_proj.weight"], 32, 2)
	q := make([]byte, 32*2*34)
	if err := ggml.Quantize(ggml.Q8_0, want, q); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ggufData(f, b, "blk.1.attn_k.weight"), q) {
		t.Errorf("q8_0 attn_k differs from the quantized permutation")
	}
	if kv, ok := f.Get("general.file_type"); !ok || kv.Value != uint32(7) {
		t.Errorf("general.file_type %v", kv.Value)
	}
}

// TestGGUFLlamaBF16: bfloat16 weights, as most Hugging Face models are
// saved, are permuted through the view as BF16 (no --gguf-type) and
// quantized from the permuted rows (q8_0).
func TestGGUFLlamaBF16(t *testing.T) {
	dir := t.TempDir()
	m := newTinyLlama()
	m.writeAs(t, dir, tinyLlamaConfig, "BF16")
	_, out := convertTiny(t, dir)
	f, b := readGGUFFile(t, out)
	want := permuteRef(m.data["model.layers.0.self_attn.q_proj.weight"], 64, 4)
	var bf []byte
	for _, x := range want {
		bf = binary.LittleEndian.AppendUint16(bf, uint16(math.Float32bits(x)>>16))
	}
	if !bytes.Equal(ggufData(f, b, "blk.0.attn_q.weight"), bf) {
		t.Errorf("bf16 attn_q differs from the permuted rows")
	}
	_, out = convertTiny(t, dir, WithGGUFType("q8_0"))
	f, b = readGGUFFile(t, out)
	k := permuteRef(m.data["model.layers.1.self_attn.k_proj.weight"], 32, 2)
	q := make([]byte, 32*2*34)
	if err := ggml.Quantize(ggml.Q8_0, k, q); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ggufData(f, b, "blk.1.attn_k.weight"), q) {
		t.Errorf("q8_0 attn_k from bf16 differs from the quantized permutation")
	}
}

// TestGGUFArchitectures: Qwen2 gets llama.cpp's names under qwen2.* and
// no permutation; an unknown architecture keeps its names, needs
// general.architecture, and says so; a config.json that is not JSON or
// has a head count that does not divide the rows fails before writing.
func TestGGUFArchitectures(t *testing.T) {
	m := newTinyLlama()
	qwen := t.TempDir()
	m.write(t, qwen, strings.Replace(tinyLlamaConfig, "LlamaForCausalLM", "Qwen2ForCausalLM", 1))
	sum, out := convertTiny(t, qwen)
	f, b := readGGUFFile(t, out)
	if kv, _ := f.Get("general.architecture"); kv.Value != "qwen2" || sum.GGUF.Permuted != 0 {
		t.Errorf("qwen2: architecture %v, permuted %d", kv.Value, sum.GGUF.Permuted)
	}
	if kv, ok := f.Get("qwen2.attention.head_count_kv"); !ok || kv.Value != uint32(2) {
		t.Errorf("qwen2.attention.head_count_kv %v", kv.Value)
	}
	if kv, ok := f.Get("qwen2.vocab_size"); !ok || kv.Value != uint32(32) {
		t.Errorf("qwen2.vocab_size %v", kv.Value)
	}
	if !bytes.Equal(ggufData(f, b, "blk.0.attn_q.weight"), f32le(m.data["model.layers.0.self_attn.q_proj.weight"])) {
		t.Errorf("qwen2: attn_q permuted")
	}

	other := t.TempDir()
	m.write(t, other, `{"architectures": ["GPTNeoXForCausalLM"]}`)
	ck, err := statedict.Open(filepath.Join(other, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	p := filepath.Join(t.TempDir(), "o.gguf")
	if _, err := Convert(context.Background(), ck, p, WithFormat(GGUF), WithHFModelDir(other)); err == nil || !strings.Contains(err.Error(), "general.architecture") {
		t.Errorf("unknown architecture without general.architecture: %v", err)
	}
	sum, err = Convert(context.Background(), ck, p, WithFormat(GGUF), WithHFModelDir(other),
		WithGGUFMetadata(gguf.KV{Key: "general.architecture", Type: gguf.TypeString, Value: "gptneox"}))
	if err != nil {
		t.Fatal(err)
	}
	if sum.GGUF == nil || sum.GGUF.Mapped || len(sum.GGUF.Notes) == 0 || !strings.Contains(sum.GGUF.Notes[0], "GPTNeoXForCausalLM") {
		t.Errorf("unknown architecture report %+v", sum.GGUF)
	}
	if f, _ := readGGUFFile(t, p); f.Tensors[0].Name != "model.embed_tokens.weight" {
		t.Errorf("unknown architecture renamed %s", f.Tensors[0].Name)
	}

	for _, bad := range []struct{ config, want string }{
		{`{"architectures": ["LlamaForCausalLM"]`, "config.json"},
		{strings.Replace(tinyLlamaConfig, `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, 1), "blk.0.attn_k.weight"},
		{strings.Replace(tinyLlamaConfig, `"hidden_size": 64`, `"hidden_size": -1`, 1), "not a uint32"},
		{strings.Replace(tinyLlamaConfig, `"num_key_value_heads": 2`, `"num_key_value_heads": 1e300`, 1), "num_key_value_heads"},
		{strings.Replace(tinyLlamaConfig, `"num_attention_heads": 4`, `"num_attention_heads": 4.5`, 1), "num_attention_heads"},
		{strings.Replace(tinyLlamaConfig, `"num_attention_heads": 4`, `"num_attention_heads": 0`, 1), "num_attention_heads"},
	} {
		d := t.TempDir()
		m.write(t, d, bad.config)
		ck, err := statedict.Open(filepath.Join(d, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, "bad.gguf")
		_, err = Convert(context.Background(), ck, p, WithFormat(GGUF), WithHFModelDir(d))
		ck.Close()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%.60s: error %v, want one naming %s", bad.config, err, bad.want)
		}
		var te *TensorError
		if !errors.Is(err, ErrHFConfig) && !errors.As(err, &te) {
			t.Errorf("%.60s: error %v is neither ErrHFConfig nor a TensorError", bad.config, err)
		}
		if _, serr := os.Stat(p); serr == nil {
			t.Errorf("%.60s: output written", bad.config)
		}
	}
}

// TestLlama3RopeFactors: rope_freqs.weight for rope_type llama3 equals,
// bit for bit, what llama.cpp's converter computes with torch (its
// generate_extra_tensors, re-typed in the test) for Llama 3.1's and a few
// other settings; and a converted model carries it.
func TestLlama3RopeFactors(t *testing.T) {
	testenv.Require(t, "torch")
	cases := []struct {
		base                      float64
		dim                       int
		factor, low, high, ctxLen float64
	}{
		{500000, 128, 8, 1, 4, 8192},
		{500000, 64, 32, 1, 4, 8192},
		{10000, 128, 4, 1, 2, 4096},
		{1e6, 96, 16, 0.5, 8, 2048},
	}
	script := `
import math, struct, sys, torch
def factors(base, dim, factor, low_freq_factor, high_freq_factor, old_context_len):
  freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
  low_freq_wavelen = old_context_len / low_freq_factor
  high_freq_wavelen = old_context_len / high_freq_factor
  rope_factors = []
  for freq in freqs:
    wavelen = 2 * math.pi / freq
    if wavelen < high_freq_wavelen:
        rope_factors.append(1)
    elif wavelen > low_freq_wavelen:
        rope_factors.append(factor)
    else:
        smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        rope_factors.append(1 / ((1 - smooth) / factor + smooth))
  sys.stdout.buffer.write(torch.tensor(rope_factors, dtype=torch.float32).numpy().tobytes())
a = sys.argv[1:]
for i in range(0, len(a), 6):
  factors(float(a[i]), int(a[i+1]), float(a[i+2]), float(a[i+3]), float(a[i+4]), float(a[i+5]))
`
	args := []string{"-c", script}
	for _, c := range cases {
		for _, v := range []float64{c.base, float64(c.dim), c.factor, c.low, c.high, c.ctxLen} {
			args = append(args, fmt.Sprint(v))
		}
	}
	out, err := exec.Command(testenv.Python(), args...).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		want := out[:min(len(out), 2*c.dim)]
		out = out[len(want):]
		got := llama3RopeFactors(c.base, c.dim, c.factor, c.low, c.high, c.ctxLen)
		if !bytes.Equal(f32le(got), want) {
			t.Errorf("%+v: %v, torch %v", c, got, want)
		}
	}

	dir := t.TempDir()
	m := newTinyLlama()
	m.write(t, dir, strings.Replace(tinyLlamaConfig, `"attention_bias": true`,
		`"attention_bias": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}`, 1))
	_, gf := convertTiny(t, dir, WithGGUFType("q8_0"))
	f, b := readGGUFFile(t, gf)
	if got := ggufData(f, b, "rope_freqs.weight"); !bytes.Equal(got, f32le(llama3RopeFactors(500000, 16, 8, 1, 4, 8192))) {
		t.Errorf("rope_freqs.weight %v", got)
	}
}
