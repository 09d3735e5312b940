package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// writeLoRA writes a PEFT adapter of rank 1 on the base's module (the
// weight's name without ".weight"), of rows x cols, to a new directory.
func writeLoRA(t *testing.T, module string, rows, cols int64) string {
	t.Helper()
	ad := t.TempDir()
	a, b := make([]float32, cols), make([]float32, rows)
	for i := range a {
		a[i] = 0.01 * float32(i%7+1)
	}
	for i := range b {
		b[i] = 0.5 - 0.03*float32(i%11)
	}
	pre := "base_model.model." + module
	writeSafetensorsF32(t, filepath.Join(ad, "adapter_model.safetensors"),
		map[string][]float32{pre + ".lora_A.weight": a, pre + ".lora_B.weight": b},
		map[string][]int64{pre + ".lora_A.weight": {1, cols}, pre + ".lora_B.weight": {rows, 1}})
	last := module[strings.LastIndexByte(module, '.')+1:]
	if err := os.WriteFile(filepath.Join(ad, "adapter_config.json"), []byte(`{"peft_type": "LORA", "r": 1, "lora_alpha": 2, "target_modules": ["`+last+`"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return ad
}

// TestMergeQuantizeSameCLI: ckpt merge --quantize same on a base made by
// ckpt convert --quantize fp8-block:8x8 reports the base's scheme, block
// size included; the output inspects as 8x8 block FP8 and passes ckpt
// verify; the untouched weight's codes and scales are the base's bytes.
// Bases in schemes ckpt does not write (GPTQ, AWQ, bitsandbytes, MLX,
// compressed-tensors int) are refused with one line naming the scheme and
// the way out, exit 1, no output; --ignore with same is a usage error.
func TestMergeQuantizeSameCLI(t *testing.T) {
	dir := t.TempDir()
	dense := filepath.Join(dir, "dense.safetensors")
	data, shapes := map[string][]float32{}, map[string][]int64{}
	for i, n := range []string{"model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight"} {
		v := make([]float32, 16*24)
		for j := range v {
			v[j] = float32(math.Sin(float64(j*(i+3)))) * 0.1
		}
		data[n], shapes[n] = v, []int64{16, 24}
	}
	data["model.norm.weight"], shapes["model.norm.weight"] = []float32{1, 2, 3}, []int64{3}
	writeSafetensorsF32(t, dense, data, shapes)
	base := filepath.Join(dir, "fp8") + "/"
	if _, code, stderr := cli("convert", "--quantize", "fp8-block:8x8", dense, base); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	ad := writeLoRA(t, "model.layers.0.self_attn.q_proj", 16, 24)
	out := filepath.Join(dir, "merged") + "/"
	stdout, code, stderr := cli("merge", "--json", "--quantize", "same", base, ad, out)
	if code != 0 {
		t.Fatalf("merge: exit %d: %s", code, stderr)
	}
	var rep struct {
		Output struct {
			Quantize struct {
				Scheme            string
				Quantized, Copied int
			}
		}
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err, stdout)
	}
	if q := rep.Output.Quantize; q.Scheme != "fp8-block:8x8" || q.Quantized != 2 || q.Copied != 1 {
		t.Errorf("report %+v", q)
	}
	stdout, code, stderr = cli("inspect", "--json", out)
	var ins struct {
		Quantization struct {
			Method  string
			Schemes []struct{ Scheme string }
		}
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &ins) != nil || ins.Quantization.Method != "fp8" || len(ins.Quantization.Schemes) != 1 ||
		!strings.Contains(ins.Quantization.Schemes[0].Scheme, "8x8 blocks") {
		t.Errorf("inspect: exit %d %s: %+v", code, stderr, ins)
	}
	if _, code, stderr = cli("verify", out); code != 0 {
		t.Errorf("verify: exit %d: %s", code, stderr)
	}
	was, now := rawTensors(t, base), rawTensors(t, out)
	for _, n := range []string{"model.layers.0.self_attn.o_proj.weight", "model.layers.0.self_attn.o_proj.weight_scale_inv", "model.norm.weight"} {
		if string(was[n]) != string(now[n]) || len(was[n]) == 0 {
			t.Errorf("%s: untouched, not the base's bytes", n)
		}
	}
	if string(was["model.layers.0.self_attn.q_proj.weight"]) == string(now["model.layers.0.self_attn.q_proj.weight"]) {
		t.Error("q_proj: merged, still the base's codes")
	}
	stdout, code, _ = cli("merge", "--quantize", "same", base, ad, filepath.Join(dir, "text")+"/")
	if code != 0 || !strings.Contains(stdout, "quantized: 2 weights as fp8-block:8x8 (1 copied as the base stores them)") {
		t.Errorf("text report: exit %d\n%s", code, stdout)
	}

	for _, c := range schemeCases() {
		var want string
		switch c.name {
		case "gptq b4v1", "awq", "mlx b8g32", "bitsandbytes nf4", "int-quantized w8":
			want = strings.Fields(c.name)[0]
		default:
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			rel, shape := c.buildRead(t)
			ad := writeLoRA(t, strings.TrimSuffix(c.logical, ".weight"), shape[0], shape[1])
			out := filepath.Join(t.TempDir(), "out")
			_, code, stderr := cli("merge", "--quantize", "same", rel, ad, out)
			if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--quantize same") || !strings.Contains(stderr, want) ||
				!strings.Contains(stderr, "--quantize fp8-block") || !strings.Contains(stderr, "dequantized") {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output left: %v", err)
			}
			t.Log(strings.TrimSpace(stderr))
			// Without --quantize the same merge writes it dequantized.
			if _, code, stderr := cli("merge", rel, ad, out+".safetensors"); code != 0 {
				t.Errorf("dequantized merge: exit %d: %s", code, stderr)
			}
		})
	}
	if _, code, _ := cli("merge", "--quantize", "same", "--ignore", "*q_proj", base, ad, filepath.Join(dir, "x")+"/"); code != 2 {
		t.Errorf("--ignore with same: exit %d, want 2", code)
	}
}

// TestMergeQuantizeSameUpstream: releases in the layouts upstream tools
// write (quant/testdata's llm-compressor NVFP4 and gpt-oss MXFP4
// fixtures) merge with --quantize same: a merged NVFP4 weight is what
// --quantize nvfp4 writes for the merged values (weight_packed,
// weight_scale, weight_global_scale as the release stores them), gpt-oss's
// expert blocks and scales, which no adapter touches, are copied byte for
// byte beside a norm the adapter replaces, and both outputs pass verify.
func TestMergeQuantizeSameUpstream(t *testing.T) {
	for _, c := range schemeCases() {
		if c.name != "nvfp4" && c.name != "mxfp4" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			rel, shape := c.buildRead(t)
			var ad string
			if c.name == "nvfp4" {
				ad = writeLoRA(t, strings.TrimSuffix(c.logical, ".weight"), shape[0], shape[1])
			} else {
				// No LoRA applies to fused experts: the adapter replaces the norm.
				ad = t.TempDir()
				writeSafetensorsF32(t, filepath.Join(ad, "adapter_model.safetensors"), map[string][]float32{"base_model.model.model.norm.weight": {3, 4}},
					map[string][]int64{"base_model.model.model.norm.weight": {2}})
				os.WriteFile(filepath.Join(ad, "adapter_config.json"), []byte(`{"peft_type": "LORA", "r": 1, "target_modules": ["q_proj"], "modules_to_save": ["norm"]}`), 0o644)
			}
			out := filepath.Join(t.TempDir(), "out") + "/"
			if _, code, stderr := cli("merge", "--quantize", "same", rel, ad, out); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if _, code, stderr := cli("verify", out); code != 0 {
				t.Errorf("verify: exit %d: %s", code, stderr)
			}
			was, now := rawTensors(t, rel), rawTensors(t, out)
			if len(was) != len(now) {
				t.Errorf("%d tensors written, the release has %d", len(now), len(was))
			}
			if c.name == "mxfp4" {
				for n, b := range was {
					if n != "model.norm.weight" && string(now[n]) != string(b) {
						t.Errorf("%s: not the release's bytes", n)
					}
				}
				if string(now["model.norm.weight"]) != string(f32bytes([]float32{3, 4})) {
					t.Errorf("norm not replaced: %x", now["model.norm.weight"])
				}
				return
			}
			explicit := filepath.Join(t.TempDir(), "explicit") + "/"
			if _, code, stderr := cli("merge", "--quantize", "nvfp4", rel, ad, explicit); code != 0 {
				t.Fatalf("--quantize nvfp4: exit %d: %s", code, stderr)
			}
			want := rawTensors(t, explicit)
			for n, b := range was {
				if string(now[n]) != string(want[n]) || n != "model.norm.weight" && string(now[n]) == string(b) {
					t.Errorf("%s: merged: not --quantize nvfp4's bytes, or still the release's", n)
				}
			}
		})
	}
}

// buildRead builds the release and returns it with the shape its
// quantized weight reads as.
func (c schemeCase) buildRead(t *testing.T) (string, []int64) {
	t.Helper()
	rel := c.build(t, "")
	ck, err := statedict.Open(rel)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	w := ck.Tensor(c.logical)
	if w == nil || len(w.Shape) < 2 {
		t.Fatalf("%s: %v", c.logical, w)
	}
	return rel, w.Shape
}

// rawTensors returns the checkpoint's tensors as stored, by name.
func rawTensors(t *testing.T, p string) map[string][]byte {
	t.Helper()
	ck, err := statedict.Open(p, statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m := map[string][]byte{}
	for _, x := range ck.Tensors {
		if m[x.Name], err = x.ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
	return m
}
