package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
)

// quantizeInput writes a small Llama-shaped float32 model: two
// projections of whole 128x128 blocks, one that is not (upstream's
// fp8-block quantizer leaves it as it is), a norm, embeddings and lm_head.
func quantizeInput(t *testing.T) (string, map[string][]float32, map[string][]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := map[string][]int64{
		"model.layers.0.mlp.up_proj.weight":      {256, 384},
		"model.layers.0.self_attn.q_proj.weight": {128, 256},
		"model.layers.0.mlp.down_proj.weight":    {200, 130},
		"model.norm.weight":                      {192},
		"model.embed_tokens.weight":              {64, 192},
		"lm_head.weight":                         {64, 192},
	}
	data := map[string][]float32{}
	for name, sh := range shapes {
		n := int64(1)
		for _, s := range sh {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * 0.02
		}
		data[name] = v
	}
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeSafetensorsF32(t, in, data, shapes)
	return in, data, shapes
}

// TestConvertQuantizeFP8Block: --quantize fp8-block writes the DeepSeek
// layout with its config.json, lists what it kept and why, and the output
// reads back (inspect, convert) as values within e4m3's rounding of the
// input, block by block: a scale applied to the wrong block, or not at
// all, is far outside that bound.
func TestConvertQuantizeFP8Block(t *testing.T) {
	src, data, shapes := quantizeInput(t)
	// The input as ckpt writes it (digests recorded, which the quantized
	// codes must not be checked against) with a model's config.json.
	in := filepath.Join(t.TempDir(), "in") + string(os.PathSeparator)
	if code, _, errs := runCLI(t, "convert", src, in); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if err := os.WriteFile(filepath.Join(in, "config.json"), []byte(`{"model_type": "llama", "torch_dtype": "float32"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "q") + string(os.PathSeparator)
	code, stdout, errs := runCLI(t, "convert", in, out, "--to", "safetensors", "--quantize", "fp8-block", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Quantize struct {
			Scheme    string `json:"scheme"`
			Quantized int    `json:"quantized"`
			Skipped   []struct {
				Name, Reason string
			} `json:"skipped"`
			Config string `json:"config"`
		} `json:"quantize"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	q := rep.Quantize
	if q.Scheme != "fp8-block" || q.Quantized != 2 || len(q.Skipped) != 4 {
		t.Fatalf("quantize report %+v", q)
	}
	for _, s := range q.Skipped {
		if strings.Contains(s.Name, "proj") != strings.Contains(s.Reason, "128x128 blocks") || s.Reason == "" {
			t.Errorf("skipped %q (%q)", s.Name, s.Reason)
		}
	}
	conf, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ModelType string `json:"model_type"`
		QC        struct {
			Method string  `json:"quant_method"`
			Fmt    string  `json:"fmt"`
			Block  []int64 `json:"weight_block_size"`
		} `json:"quantization_config"`
	}
	if err := json.Unmarshal(conf, &cfg); err != nil || cfg.ModelType != "llama" || cfg.QC.Method != "fp8" || cfg.QC.Fmt != "e4m3" || len(cfg.QC.Block) != 2 || cfg.QC.Block[0] != 128 || cfg.QC.Block[1] != 128 {
		t.Fatalf("config.json %s (%v)", conf, err)
	}

	// The digests it recorded are of what it stored.
	if code, stdout, errs := runCLI(t, "verify", out); code != 0 {
		t.Fatalf("verify %s: exit %d: %s%s", out, code, stdout, errs)
	}

	// Stored as the layout says.
	raw, err := statedict.Open(out, statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	stored := map[string]*statedict.Tensor{}
	for _, tn := range raw.Tensors {
		stored[tn.Name] = tn
	}
	w, s := stored["model.layers.0.self_attn.q_proj.weight"], stored["model.layers.0.self_attn.q_proj.weight_scale_inv"]
	if w == nil || s == nil || w.DType.String() != "float8_e4m3fn" || len(s.Shape) != 2 || s.Shape[0] != 1 || s.Shape[1] != 2 {
		t.Fatalf("stored q_proj: %v, scale %v", w, s)
	}

	// Read back dequantized: names and shapes of the input, values within
	// half an e4m3 step (2^-4 relative) of the input, or the block's
	// subnormal spacing.
	back := filepath.Join(t.TempDir(), "back.safetensors")
	if code, _, errs := runCLI(t, "convert", out, back, "--dtype", "float32"); code != 0 {
		t.Fatalf("read back: exit %d: %s", code, errs)
	}
	// Without its config.json the file reads by its tensor names
	// (DeepSeek's default 128x128 blocks), as bfloat16, the default
	// logical dtype (the config said float32): the same values to
	// bfloat16's rounding.
	bare := filepath.Join(t.TempDir(), "bare.safetensors")
	if b, err := os.ReadFile(filepath.Join(out, "model.safetensors")); err != nil || os.WriteFile(bare, b, 0o644) != nil {
		t.Fatal(err)
	}
	back2 := filepath.Join(t.TempDir(), "back2.safetensors")
	if code, _, errs := runCLI(t, "convert", bare, back2, "--dtype", "float32"); code != 0 {
		t.Fatalf("read back without config.json: exit %d: %s", code, errs)
	}
	if code, stdout, errs := runCLI(t, "verify", back, back2, "--rtol", "0.004", "--atol", "0"); code != 0 {
		t.Fatalf("with and without config.json: exit %d: %s%s", code, stdout, errs)
	}
	ck, err := statedict.Open(back)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Tensors) != len(shapes) {
		t.Fatalf("%d tensors read back, want %d", len(ck.Tensors), len(shapes))
	}
	for _, tn := range ck.Tensors {
		want := data[tn.Name]
		b, err := tn.ReadAll()
		if err != nil || len(b) != 4*len(want) {
			t.Fatalf("%s: %d bytes, %v", tn.Name, len(b), err)
		}
		quantized := strings.Contains(tn.Name, "up_proj") || strings.Contains(tn.Name, "q_proj")
		cols := int(shapes[tn.Name][len(shapes[tn.Name])-1])
		amax := map[[2]int]float32{} // each 128x128 block's largest magnitude
		for i, v := range want {
			k := [2]int{(i / cols) / 128, (i % cols) / 128}
			amax[k] = max(amax[k], float32(math.Abs(float64(v))))
		}
		for i, v := range want {
			got := math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
			if !quantized {
				if got != v {
					t.Fatalf("%s[%d] = %g, want %g (kept as it was)", tn.Name, i, got, v)
				}
				continue
			}
			amax := amax[[2]int{(i / cols) / 128, (i % cols) / 128}]
			bound := max(float32(math.Abs(float64(v)))/16, amax/448*float32(math.Ldexp(1, -9)))
			if d := float32(math.Abs(float64(got - v))); d > bound*1.0001 {
				t.Fatalf("%s[%d] = %g, want %g within %g", tn.Name, i, got, v, bound)
			}
		}
	}
}

// TestConvertQuantizeRefusals: flags that cannot work stop before anything
// is written, on one line.
func TestConvertQuantizeRefusals(t *testing.T) {
	in, _, _ := quantizeInput(t)
	normOnly := filepath.Join(t.TempDir(), "norm.safetensors")
	writeSafetensorsF32(t, normOnly, map[string][]float32{"model.norm.weight": {1, 2}}, map[string][]int64{"model.norm.weight": {2}})
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{in, "OUT.safetensors", "--quantize", "fp9"}, 2, "fp9"},
		{[]string{in, "OUT.gguf", "--quantize", "fp8-block"}, 2, "gguf"},
		{[]string{in, "OUT.safetensors", "--ignore", "lm_head*"}, 2, "--ignore needs --quantize"},
		{[]string{normOnly, "OUT.safetensors", "--quantize", "fp8-block"}, 1, "no tensor to quantize"},
	} {
		dir := t.TempDir()
		args := append([]string{"convert"}, c.args...)
		args[2] = filepath.Join(dir, c.args[1])
		code, _, errs := runCLI(t, args...)
		if code != c.code || !strings.Contains(strings.ToLower(errs), strings.ToLower(c.want)) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q on one line", c.args, code, errs, c.code, c.want)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("%v: left %d entries in the output directory", c.args, len(ents))
		}
	}
	// --ignore keeps a weight as it is and says why.
	out := filepath.Join(t.TempDir(), "q.safetensors")
	code, stdout, errs := runCLI(t, "convert", in, out, "--quantize", "fp8-block", "--ignore", "*.q_proj.weight")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "quantized: 1 weights to fp8-block") || !strings.Contains(stdout, "kept model.layers.0.self_attn.q_proj.weight") {
		t.Errorf("--ignore: %s", stdout)
	}
}

// TestConvertQuantizeDamagedInput: under --quantize the weights are read
// through the checked read every convert read goes through: one byte
// flipped in a weight the scheme quantizes (its recorded digest then
// disagrees) is refused with the line a plain convert gives, and nothing
// is written, for each scheme.
func TestConvertQuantizeDamagedInput(t *testing.T) {
	src, _, _ := quantizeInput(t)
	in := filepath.Join(t.TempDir(), "in.safetensors")
	if code, _, errs := runCLI(t, "convert", src, in); code != 0 { // records digests
		t.Fatalf("exit %d: %s", code, errs)
	}
	// Clean, every output takes it: the codes written under a weight's
	// name are not held to the digest the input recorded for its values.
	for _, out := range []string{"c.safetensors", "c.pth"} {
		if code, _, errs := runCLI(t, "convert", in, filepath.Join(t.TempDir(), out), "--quantize", "fp8-channel"); code != 0 {
			t.Fatalf("clean input to %s: exit %d: %s", out, code, errs)
		}
	}
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	const name = "model.layers.0.mlp.up_proj.weight"
	ti, ok := h.Lookup(name)
	if !ok {
		t.Fatal(name + " not found")
	}
	// A byte near the end: the damage is found once the whole tensor has
	// streamed by, not from its first rows.
	data[h.DataOffset+ti.End-3] ^= 0x10
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, _, plain := runCLI(t, "convert", in, filepath.Join(dir, "plain.safetensors"))
	if code != 1 || !strings.Contains(plain, name) || !strings.Contains(plain, "digest") || strings.Count(plain, "\n") != 1 {
		t.Fatalf("plain convert of the damaged input: exit %d, %q", code, plain)
	}
	for _, scheme := range []string{"fp8-block", "fp8-channel", "nvfp4"} {
		for _, out := range []string{"q.safetensors", "q.pth", "q.safetensors.index.json"} {
			o := filepath.Join(dir, out)
			code, _, errs := runCLI(t, "convert", in, o, "--quantize", scheme)
			if code != 1 || errs != strings.ReplaceAll(plain, filepath.Join(dir, "plain.safetensors"), o) {
				t.Errorf("--quantize %s to %s: exit %d, %q; want the plain convert's %q", scheme, out, code, errs, plain)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("--quantize %s to %s: left %d entries", scheme, out, len(ents))
			}
		}
	}
}

// TestConvertQuantizeFusedExperts: --quantize fp8-block takes fused MoE
// experts [E, out, in] (transformers' FP8Experts layout: the scale keeps
// the expert dimension), and the output reads back, dequantized, as the
// input's shape and values within e4m3's half step (and bfloat16's, the
// logical dtype without a torch_dtype), or the largest block's subnormal
// half step (11/448 * 2^-10 < 3e-5); the experts differ in magnitude by
// 16x, so a scale applied to the wrong expert is far
// outside that bound.
func TestConvertQuantizeFusedExperts(t *testing.T) {
	const name = "model.layers.0.mlp.experts.gate_up_proj"
	rng := rand.New(rand.NewPCG(5, 6))
	v := make([]float32, 3*256*128)
	for i := range v {
		v[i] = float32(rng.NormFloat64()) * 0.01 * float32(math.Pow(16, float64(i/(256*128))))
	}
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeSafetensorsF32(t, in, map[string][]float32{name: v}, map[string][]int64{name: {3, 256, 128}})
	out := filepath.Join(t.TempDir(), "q") + string(os.PathSeparator)
	if code, _, errs := runCLI(t, "convert", in, out, "--to", "safetensors", "--quantize", "fp8-block"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	raw, err := statedict.Open(out, statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	w, s := raw.Tensor(name), raw.Tensor(name+"_scale_inv")
	if w == nil || s == nil || w.DType.String() != "float8_e4m3fn" || fmt.Sprint(w.Shape) != "[3 256 128]" || fmt.Sprint(s.Shape) != "[3 2 1]" {
		t.Fatalf("stored %v, scale %v", w, s)
	}
	if code, stdout, errs := runCLI(t, "verify", out); code != 0 {
		t.Fatalf("verify: exit %d: %s%s", code, stdout, errs)
	}
	back := filepath.Join(t.TempDir(), "back.safetensors")
	if code, _, errs := runCLI(t, "convert", out, back, "--dtype", "float32"); code != 0 {
		t.Fatalf("read back: exit %d: %s", code, errs)
	}
	if code, stdout, errs := runCLI(t, "verify", back, in, "--rtol", "0.067", "--atol", "3e-5"); code != 0 {
		t.Fatalf("read back vs input: exit %d: %s%s", code, stdout, errs)
	}
}

// TestConvertDequantizeChecksStored: converting a quantized release ckpt
// wrote (digests recorded of its codes and scales) reads each weight
// dequantized, checking its stored tensors against those digests: clean,
// every output takes it; one byte flipped in a code or in a scale is
// refused naming that stored tensor, nothing written.
func TestConvertDequantizeChecksStored(t *testing.T) {
	src, _, _ := quantizeInput(t)
	q := filepath.Join(t.TempDir(), "q") + string(os.PathSeparator)
	if code, _, errs := runCLI(t, "convert", src, q, "--to", "safetensors", "--quantize", "fp8-block"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, out := range []string{"c.safetensors", "c.pth"} {
		if code, _, errs := runCLI(t, "convert", q, filepath.Join(t.TempDir(), out)); code != 0 {
			t.Fatalf("clean release to %s: exit %d: %s", out, code, errs)
		}
	}
	file := filepath.Join(q, "model.safetensors")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight_scale_inv"} {
		ti, ok := h.Lookup(name)
		if !ok {
			t.Fatal(name + " not stored")
		}
		bad := bytes.Clone(data)
		bad[h.DataOffset+ti.Begin+2] ^= 0x01
		if err := os.WriteFile(file, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{"d.safetensors", "d.pth"} {
			dir := t.TempDir()
			code, _, errs := runCLI(t, "convert", q, filepath.Join(dir, out))
			if code != 1 || !strings.Contains(errs, strconv.Quote(name)+": convert: input is damaged") || strings.Count(errs, "\n") != 1 {
				t.Errorf("%s flipped, to %s: exit %d, %q", name, out, code, errs)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("%s flipped, to %s: left %d entries", name, out, len(ents))
			}
		}
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
