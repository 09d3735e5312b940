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
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
	ollama "github.com/ollama/ollama/fs/ggml"
)

// gptOssConfig is gpt-oss-20b's config.json with the sizes cut down
// (2 layers, sliding then full attention, 4 experts of which 2 are used,
// hidden and expert width 64: two MXFP4 groups a row) and its YaRN rope
// scaling kept, but for truncate: gpt-oss says false (transformers then
// keeps the YaRN correction range fractional), and the llama.cpp that
// ollama v0.17.4 vendors always floors and ceils it
// (ggml_rope_yarn_corr_dims), which moves this tiny model's logits by up
// to 1.06 of 2.8 against transformers whatever the GGUF holds; with
// truncate true both compute the same frequencies.
var gptOssConfig = map[string]any{
	"architectures": []string{"GptOssForCausalLM"}, "attention_bias": true, "experts_per_token": 2, "head_dim": 16,
	"hidden_act": "silu", "hidden_size": 64, "initial_context_length": 64, "intermediate_size": 64,
	"layer_types": []string{"sliding_attention", "full_attention"}, "max_position_embeddings": 256, "model_type": "gpt_oss",
	"num_attention_heads": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_key_value_heads": 2,
	"num_local_experts": 4, "rms_norm_eps": 1e-05,
	"quantization_config": map[string]any{"modules_to_not_convert": []string{"model.layers.*.self_attn", "model.layers.*.mlp.router",
		"model.embed_tokens", "lm_head"}, "quant_method": "mxfp4"},
	"rope_scaling": map[string]any{"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 64,
		"rope_type": "yarn", "truncate": true},
	"rope_theta": 150000.0, "sliding_window": 8, "swiglu_limit": 7.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
	"vocab_size": 96,
}

// writeGptOss writes a gpt-oss MXFP4 release as openai/gpt-oss-20b is
// laid out: bfloat16 attention, router, embeddings and biases (normal,
// std 0.1; norms around 1), the experts' gate_up_proj and down_proj as
// `_blocks` (random E2M1 codes) and `_scales` (2^-6 .. 2^-3).
func writeGptOss(t *testing.T, dir string, config map[string]any) {
	t.Helper()
	h, inter, e := int64(config["hidden_size"].(int)), int64(config["intermediate_size"].(int)), int64(config["num_local_experts"].(int))
	heads, kv, hd, vocab := int64(config["num_attention_heads"].(int)), int64(config["num_key_value_heads"].(int)), int64(config["head_dim"].(int)), int64(config["vocab_size"].(int))
	type spec struct {
		dt    string
		shape []int64
	}
	specs := map[string]spec{"model.embed_tokens.weight": {"BF16", []int64{vocab, h}}, "model.norm.weight": {"BF16", []int64{h}},
		"lm_head.weight": {"BF16", []int64{vocab, h}}}
	for l := range config["num_hidden_layers"].(int) {
		p := fmt.Sprintf("model.layers.%d.", l)
		for n, s := range map[string][]int64{
			"input_layernorm.weight": {h}, "post_attention_layernorm.weight": {h},
			"self_attn.q_proj.weight": {heads * hd, h}, "self_attn.q_proj.bias": {heads * hd},
			"self_attn.k_proj.weight": {kv * hd, h}, "self_attn.k_proj.bias": {kv * hd},
			"self_attn.v_proj.weight": {kv * hd, h}, "self_attn.v_proj.bias": {kv * hd},
			"self_attn.o_proj.weight": {h, heads * hd}, "self_attn.o_proj.bias": {h}, "self_attn.sinks": {heads},
			"mlp.router.weight": {e, h}, "mlp.router.bias": {e},
			"mlp.experts.gate_up_proj_bias": {e, 2 * inter}, "mlp.experts.down_proj_bias": {e, h},
		} {
			specs[p+n] = spec{"BF16", s}
		}
		for n, s := range map[string][]int64{"gate_up_proj": {e, 2 * inter, h / 32}, "down_proj": {e, h, inter / 32}} {
			specs[p+"mlp.experts."+n+"_blocks"] = spec{"U8", append(append([]int64(nil), s...), 16)}
			specs[p+"mlp.experts."+n+"_scales"] = spec{"U8", s}
		}
	}
	names := make([]string, 0, len(specs))
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	r := rand.New(rand.NewSource(17))
	hdr := map[string]any{}
	var body []byte
	for _, n := range names {
		s := specs[n]
		k := int64(1)
		for _, d := range s.shape {
			k *= d
		}
		start := len(body)
		for range k {
			switch {
			case strings.HasSuffix(n, "_blocks"):
				body = append(body, byte(r.Intn(256)))
			case strings.HasSuffix(n, "_scales"):
				body = append(body, byte(121+r.Intn(4)))
			default:
				v := float32(r.NormFloat64() * 0.1)
				if strings.HasSuffix(n, "norm.weight") {
					v += 1
				}
				b := math.Float32bits(v)
				b += 0x7fff + (b>>16)&1 // round to nearest even bfloat16
				body = binary.LittleEndian.AppendUint16(body, uint16(b>>16))
			}
		}
		hdr[n] = map[string]any{"dtype": s.dt, "shape": s.shape, "data_offsets": []int{start, len(body)}}
	}
	writeModelDir(t, dir, hdr, body, config)
}

// convertDir converts dir's model.safetensors to out with opts.
func convertDir(t *testing.T, dir, out string, opts ...convert.Option) {
	t.Helper()
	ck, err := statedict.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := convert.Convert(context.Background(), ck, out, opts...); err != nil {
		t.Fatal(err)
	}
}

// runLogits runs a command that writes n x vocab float32 logits.
func runLogits(t *testing.T, what string, n int, name string, args ...string) []float32 {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, stderr.String())
	}
	v := floats(out)
	if len(v) != n {
		t.Fatalf("%s gave %d logits, want %d", what, len(v), n)
	}
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("%s: logit %d is %g", what, i, x)
		}
	}
	return v
}

// maxDiff returns the largest |a-b| and the largest |b|.
func maxDiff(a, b []float32) (d, m float64) {
	for i := range b {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		m = max(m, math.Abs(float64(b[i])))
	}
	return d, m
}

// TestLlamaCppRunsGptOss: llama.cpp itself (as vendored by ollama
// v0.17.4, llamacpp/build.sh) loads the GGUF ckpt writes from a tiny
// gpt-oss MXFP4 release (architecture gpt-oss: attention sinks,
// sliding-window and full layers, biases, a router and 4 experts with
// gate/up split out of gate_up_proj, YaRN) and computes, for 24 tokens
// (three sliding windows), the logits that gpt-oss's forward pass
// computes in torch (llamacpp/ref_gptoss.py, from transformers'
// modeling_gpt_oss) from ckpt's float32 dequantization of the same
// release: with the MXFP4 blocks copied, with the experts dequantized to
// bfloat16 (same values), with every tensor float32, and under
// --gguf-type q8_0 (experts still copied). A wrong name or
// dims is a load failure; a wrong split, orientation or hyperparameter
// moves the logits far past the tolerances (tried: gate and up swapped in
// the split, or a sliding window of 64 written, move them by 3.2 where
// the float32 GGUF is within 4e-6 of torch).
func TestLlamaCppRunsGptOss(t *testing.T) {
	drv := llamaCppDriver(t)
	dir := t.TempDir()
	writeGptOss(t, dir, gptOssConfig)
	tmp := t.TempDir()
	r := rand.New(rand.NewSource(3))
	const T, V = 24, 96
	var toks []string
	for range T {
		toks = append(toks, strconv.Itoa(r.Intn(V)))
	}
	// The reference's weights: ckpt's dequantization, float32, in
	// transformers' layout (checked against transformers elsewhere).
	refDir := filepath.Join(tmp, "ref")
	if err := os.Mkdir(refDir, 0o755); err != nil {
		t.Fatal(err)
	}
	convertDir(t, dir, filepath.Join(refDir, "model.safetensors"), convert.WithDType(dtype.Float32))
	cb, _ := json.Marshal(gptOssConfig)
	if err := os.WriteFile(filepath.Join(refDir, "config.json"), cb, 0o644); err != nil {
		t.Fatal(err)
	}
	want := runLogits(t, "ref_gptoss.py", T*V, testenv.Python(), append([]string{filepath.Join("llamacpp", "ref_gptoss.py"), refDir}, toks...)...)

	got := map[string][]float32{}
	for _, typ := range []string{"", "bf16", "f32", "q8_0"} {
		out := filepath.Join(tmp, "m"+typ+".gguf")
		opts := []convert.Option{convert.WithFormat(convert.GGUF), convert.WithHFModelDir(dir)}
		if typ != "" {
			opts = append(opts, convert.WithGGUFType(typ))
		}
		convertDir(t, dir, out, opts...)
		got[typ] = runLogits(t, "llama.cpp ("+out+")", T*V, drv, append([]string{out}, toks...)...)
	}
	for _, c := range []struct {
		name string
		a, b []float32
		tol  float64 // of the largest logit
		// flips: positions allowed past tol, where the router's top-2
		// can flip between two nearly tied experts (0: none)
		flips int
	}{
		// Everything float32: plain float32 arithmetic on both sides.
		{"f32 GGUF vs torch", got["f32"], want, 1e-4, 0},
		// MXFP4 blocks: ggml's CPU kernel quantizes the activations to
		// Q8_0 for its dot products with MXFP4 (bfloat16 for bfloat16
		// weights), so these differ by activation rounding only.
		{"MXFP4 GGUF vs torch", got[""], want, 0.05, 0},
		{"bf16 GGUF vs torch", got["bf16"], want, 0.05, 0},
		{"MXFP4 GGUF vs bf16 GGUF", got[""], got["bf16"], 0.05, 0},
		// Q8_0 attention, embedding and output weights (the experts MXFP4
		// as copied). Measured: 0.75 and 0.27 apart at 2 of 24 positions,
		// at most 0.13 elsewhere, as when the rounding moves a router's
		// input across a nearly tied top-2 choice (not traced further).
		{"q8_0 GGUF vs torch", got["q8_0"], want, 0.05, 3},
	} {
		d, m := maxDiff(c.a, c.b)
		t.Logf("%s: max |difference| %.3g over logits up to %.3g", c.name, d, m)
		if c.flips > 0 {
			far := 0
			for p := range T {
				if dp, _ := maxDiff(c.a[p*V:(p+1)*V], c.b[p*V:(p+1)*V]); dp > c.tol*(1+m) {
					far++
				}
			}
			t.Logf("%s: %d of %d positions past the tolerance", c.name, far, T)
			if far > c.flips {
				t.Errorf("%s: %d positions differ by more than %.3g of the largest logit %.3g", c.name, far, c.tol, m)
			}
		} else if d > c.tol*(1+m) {
			t.Errorf("%s: logits differ by up to %.3g (logits up to %.3g, tolerance %.3g of them)", c.name, d, m, c.tol)
		}
	}
}

// TestReadersReadGptOss: ollama's reader reads the gpt-oss GGUF (MXFP4
// experts copied) with the gpt-oss hyperparameters and llama.cpp's tensor
// names, types and dims; @huggingface/gguf reads the same tensor infos
// and architecture as ckpt's reader.
func TestReadersReadGptOss(t *testing.T) {
	dir := t.TempDir()
	writeGptOss(t, dir, gptOssConfig)
	out := filepath.Join(t.TempDir(), "m.gguf")
	convertDir(t, dir, out, convert.WithFormat(convert.GGUF), convert.WithHFModelDir(dir))
	g := ollamaDecode(t, out)
	kv := g.KV()
	if kv.Architecture() != "gpt-oss" || kv.BlockCount() != 2 || kv.Uint("expert_count") != 4 || kv.Uint("expert_used_count") != 2 ||
		kv.Uint("attention.sliding_window") != 8 || kv.Uint("expert_feed_forward_length") != 64 || kv.String("rope.scaling.type") != "yarn" {
		t.Errorf("ollama's view of the hyperparameters: %v", kv)
	}
	blk := g.Tensors().GroupLayers()["blk.1"]
	for _, n := range []string{"attn_sinks.weight", "post_attention_norm.weight", "ffn_gate_inp.weight", "ffn_gate_inp.bias",
		"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"} {
		if blk[n] == nil {
			t.Errorf("ollama: no blk.1.%s", n)
		}
	}
	if x := blk["ffn_gate_exps.weight"]; x != nil && (x.Type() != "MXFP4" || fmt.Sprint(x.Shape) != "[64 64 4]") {
		t.Errorf("ollama: ffn_gate_exps %s %v", x.Type(), x.Shape)
	}
	t.Run("huggingface", func(t *testing.T) { checkJSReads(t, out, "gpt-oss") })
}

// checkJSReads: @huggingface/gguf reads the file at p with general.architecture
// arch and the tensor infos (name, type, offset) ckpt's reader gives.
func checkJSReads(t *testing.T, p, arch string) {
	t.Helper()
	got := runJS(t, p)[0]
	mine := ckptView(t, p)
	if a := got.Metadata["general.architecture"]; string(a.Value) != strconv.Quote(arch) {
		t.Errorf("general.architecture %s", a.Value)
	}
	if len(got.Tensors) != len(mine.Tensors) {
		t.Fatalf("%d tensors, ckpt %d", len(got.Tensors), len(mine.Tensors))
	}
	for i, ti := range mine.Tensors {
		if g := got.Tensors[i]; g.Name != ti.Name || g.DType != int(ti.Type) || g.Offset != fmt.Sprint(ti.Offset) {
			t.Errorf("tensor %d: %+v, ckpt %s type %d offset %d", i, g, ti.Name, ti.Type, ti.Offset)
		}
	}
}

// writeModelDir writes a safetensors header and body as
// dir/model.safetensors, and config as dir/config.json.
func writeModelDir(t *testing.T, dir string, hdr map[string]any, body []byte, config map[string]any) {
	t.Helper()
	hb, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(hb)))
	b.Write(hb)
	b.Write(body)
	cb, _ := json.Marshal(config)
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cb, 0o644); err != nil {
		t.Fatal(err)
	}
}

// llamaCppDriver returns the llama.cpp driver CKPT_LLAMACPP_LOGITS names
// and requires torch for the reference; without the driver the test is
// skipped, or fails under CKPT_REQUIRE_GGUFCHECK=1.
func llamaCppDriver(t *testing.T) string {
	t.Helper()
	drv := os.Getenv(llamaCppEnv)
	if drv == "" {
		if os.Getenv(requireEnv) == "1" {
			t.Fatalf("%s=1 but %s is not set (internal/ggufcheck/llamacpp/build.sh OUTDIR builds the driver)", requireEnv, llamaCppEnv)
		}
		t.Skipf("%s not set: build the driver with internal/ggufcheck/llamacpp/build.sh", llamaCppEnv)
	}
	testenv.Require(t, "torch")
	return drv
}

// ollamaDecode reads the GGUF file at p with ollama's reader.
func ollamaDecode(t *testing.T, p string) *ollama.GGML {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := ollama.Decode(f, -1)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
