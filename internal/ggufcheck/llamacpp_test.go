package ggufcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// llamaCppEnv names the driver llamacpp/build.sh builds.
const llamaCppEnv = "CKPT_LLAMACPP_LOGITS"

// writeRandomLlama writes a Hugging Face Llama directory: random weights
// (normal, std 0.1), biases on every attention projection (Qwen2: q, k
// and v only), config as given.
func writeRandomLlama(t *testing.T, dir string, config map[string]any) {
	t.Helper()
	h, inter, layers := int64(config["hidden_size"].(int)), int64(config["intermediate_size"].(int)), config["num_hidden_layers"].(int)
	heads, kv, vocab := int64(config["num_attention_heads"].(int)), int64(config["num_key_value_heads"].(int)), int64(config["vocab_size"].(int))
	hd := h / heads
	shapes := map[string][]int64{"model.embed_tokens.weight": {vocab, h}, "model.norm.weight": {h}, "lm_head.weight": {vocab, h}}
	var names []string
	for l := range layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		for n, s := range map[string][]int64{
			"self_attn.q_proj.weight": {heads * hd, h}, "self_attn.q_proj.bias": {heads * hd},
			"self_attn.k_proj.weight": {kv * hd, h}, "self_attn.k_proj.bias": {kv * hd},
			"self_attn.v_proj.weight": {kv * hd, h}, "self_attn.v_proj.bias": {kv * hd},
			"self_attn.o_proj.weight": {h, heads * hd}, "self_attn.o_proj.bias": {h},
			"mlp.gate_proj.weight": {inter, h}, "mlp.up_proj.weight": {inter, h}, "mlp.down_proj.weight": {h, inter},
			"input_layernorm.weight": {h}, "post_attention_layernorm.weight": {h}} {
			shapes[p+n] = s
		}
	}
	if config["architectures"].([]string)[0] == "Qwen2ForCausalLM" {
		for l := range layers {
			delete(shapes, fmt.Sprintf("model.layers.%d.self_attn.o_proj.bias", l))
		}
	}
	for n := range shapes {
		names = append(names, n)
	}
	slicesSort(names)
	r := rand.New(rand.NewSource(11))
	hdr := map[string]any{}
	var body []byte
	for _, n := range names {
		k := int64(1)
		for _, d := range shapes[n] {
			k *= d
		}
		start := len(body)
		for range k {
			v := float32(r.NormFloat64() * 0.1)
			if len(shapes[n]) == 1 && n[len(n)-6:] == "weight" { // norms around 1
				v += 1
			}
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(v))
		}
		hdr[n] = map[string]any{"dtype": "F32", "shape": shapes[n], "data_offsets": []int{start, len(body)}}
	}
	writeModelDir(t, dir, hdr, body, config)
}

func slicesSort(s []string) {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
}

func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// TestLlamaCppRunsLlama: llama.cpp itself (as vendored by ollama v0.17.4,
// built by llamacpp/build.sh) loads the float32 GGUF ckpt writes from a
// Hugging Face Llama directory (grouped-query attention, biases on every
// projection, llama3 rope scaling) and computes, for every position of a
// 96-token sequence, the logits Hugging Face's Llama forward pass computes
// in torch from the safetensors (llamacpp/ref.py), and close to them from
// a Q8_0 GGUF: the names, the q/k
// permutation, the hyperparameters and rope_freqs.weight are all right,
// or the numbers differ. It needs CKPT_LLAMACPP_LOGITS (the driver) and
// torch; CI builds the driver and sets CKPT_REQUIRE_GGUFCHECK=1.
func TestLlamaCppRunsLlama(t *testing.T) {
	drv := llamaCppDriver(t)
	for _, tc := range []struct {
		name  string
		extra map[string]any
		typ   string  // --gguf-type, "" for float32 as saved
		tol   float64 // of the largest logit
	}{
		{"plain", nil, "", 1e-3},
		{"llama3-rope", map[string]any{"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8.0,
			"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}}, "", 1e-3},
		// Q8_0 weights: llama.cpp also quantizes activations to Q8_0 for
		// its dot products; the error is quantization's, not layout's.
		{"q8_0", nil, "q8_0", 0.05},
		// Qwen2: llama.cpp's qwen2 (NeoX rotary, no permutation).
		{"qwen2", map[string]any{"architectures": []string{"Qwen2ForCausalLM"}}, "", 1e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			config := map[string]any{"architectures": []string{"LlamaForCausalLM"}, "hidden_size": 128, "intermediate_size": 256,
				"num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 96,
				"max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "attention_bias": true}
			for k, v := range tc.extra {
				config[k] = v
			}
			writeRandomLlama(t, dir, config)
			ck, err := statedict.Open(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			opts := []convert.Option{convert.WithFormat(convert.GGUF), convert.WithHFModelDir(dir)}
			if tc.typ != "" {
				opts = append(opts, convert.WithGGUFType(tc.typ))
			}
			_, err = convert.Convert(context.Background(), ck, out, opts...)
			ck.Close()
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewSource(5))
			var toks []string
			for range 96 {
				toks = append(toks, strconv.Itoa(r.Intn(96)))
			}
			var stderr bytes.Buffer
			cmd := exec.Command(drv, append([]string{out}, toks...)...)
			cmd.Stderr = &stderr
			got, err := cmd.Output()
			if err != nil {
				t.Fatalf("llama.cpp: %v\n%s", err, stderr.String())
			}
			cmd = exec.Command(testenv.Python(), append([]string{filepath.Join("llamacpp", "ref.py"), dir}, toks...)...)
			cmd.Stderr = &stderr
			want, err := cmd.Output()
			if err != nil {
				t.Fatalf("ref.py: %v\n%s", err, stderr.String())
			}
			g, w := floats(got), floats(want)
			if len(g) != len(w) || len(w) != 96*96 {
				t.Fatalf("llama.cpp gave %d logits, torch %d, want %d", len(g), len(w), 96*96)
			}
			var maxDiff, maxAbs float64
			for i := range w {
				maxDiff = max(maxDiff, math.Abs(float64(g[i]-w[i])))
				maxAbs = max(maxAbs, math.Abs(float64(w[i])))
			}
			t.Logf("max |llama.cpp - torch| = %.3g over logits up to %.3g", maxDiff, maxAbs)
			if maxDiff > tc.tol*(1+maxAbs) {
				t.Errorf("llama.cpp's logits differ from torch's by up to %.3g (logits up to %.3g)", maxDiff, maxAbs)
			}
		})
	}
}
