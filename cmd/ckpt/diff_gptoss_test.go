package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tiny gpt-oss: gpt-oss-20b's config.json with every size cut down
// (convert/gguf_gptoss_test.go's model: hidden 64, expert width 64, two
// MXFP4 groups of 32 a row).
const (
	gtH, gtI, gtE, gtHeads, gtKV, gtHD, gtV, gtL = 64, 64, 4, 4, 2, 16, 96, 2
	// gtHF is the release's tensor count: 3 outside the layers, 17 a
	// layer (2 norms, q/k/v/o weights and biases, sinks, the router's
	// weight and bias, gate_up_proj, down_proj and their biases).
	gtHF = 3 + 17*gtL
)

// writeTinyGptOss writes a tiny gpt-oss release into dir: config.json and
// model.safetensors, bfloat16 tensors and, quantized, the experts as
// MXFP4 `_blocks`/`_scales` in the stored orientation ([E, out, in/32,
// 16]), else bfloat16 experts in transformers' [E, in, out] layout.
// Without negZero no FP4 code is 8 (E2M1's -0, which transformers
// decodes as -0.0 and ggml as +0.0: kvalues_mxfp4 holds integers).
func writeTinyGptOss(t *testing.T, dir string, quantized, negZero bool, seed int64) {
	t.Helper()
	r := rand.New(rand.NewSource(seed))
	var names, dts []string
	var shapes [][]int64
	var data [][]byte
	add := func(name, dt string, shape []int64, b []byte) {
		names, dts, shapes, data = append(names, name), append(dts, dt), append(shapes, shape), append(data, b)
	}
	bf16 := func(name string, shape ...int64) {
		n := int64(1)
		for _, s := range shape {
			n *= s
		}
		b := make([]byte, 2*n)
		for i := range n {
			x := float32(r.NormFloat64() * 0.1)
			if strings.HasSuffix(name, "norm.weight") {
				x++
			}
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(x)>>16))
		}
		add(name, "BF16", shape, b)
	}
	bf16("model.embed_tokens.weight", gtV, gtH)
	bf16("model.norm.weight", gtH)
	bf16("lm_head.weight", gtV, gtH)
	for l := range gtL {
		p := fmt.Sprintf("model.layers.%d.", l)
		bf16(p+"input_layernorm.weight", gtH)
		bf16(p+"post_attention_layernorm.weight", gtH)
		for _, x := range []struct {
			n        string
			out, in_ int64
		}{{"q", gtHeads * gtHD, gtH}, {"k", gtKV * gtHD, gtH}, {"v", gtKV * gtHD, gtH}, {"o", gtH, gtHeads * gtHD}} {
			bf16(p+"self_attn."+x.n+"_proj.weight", x.out, x.in_)
			bf16(p+"self_attn."+x.n+"_proj.bias", x.out)
		}
		bf16(p+"self_attn.sinks", gtHeads)
		bf16(p+"mlp.router.weight", gtE, gtH)
		bf16(p+"mlp.router.bias", gtE)
		bf16(p+"mlp.experts.gate_up_proj_bias", gtE, 2*gtI)
		bf16(p+"mlp.experts.down_proj_bias", gtE, gtH)
		for _, e := range []struct {
			name     string
			out, in_ int64
		}{{"gate_up_proj", 2 * gtI, gtH}, {"down_proj", gtH, gtI}} {
			if !quantized {
				bf16(p+"mlp.experts."+e.name, gtE, e.in_, e.out)
				continue
			}
			groups := gtE * e.out * e.in_ / 32
			blk, sc := make([]byte, 16*groups), make([]byte, groups)
			r.Read(blk)
			for i, b := range blk {
				if !negZero && b&0x0F == 8 {
					b &^= 0x0F
				}
				if !negZero && b>>4 == 8 {
					b &^= 0xF0
				}
				blk[i] = b
			}
			for i := range sc {
				sc[i] = byte(121 + r.Intn(4)) // 2^-6 .. 2^-3
			}
			add(p+"mlp.experts."+e.name+"_blocks", "U8", []int64{gtE, e.out, e.in_ / 32, 16}, blk)
			add(p+"mlp.experts."+e.name+"_scales", "U8", []int64{gtE, e.out, e.in_ / 32}, sc)
		}
	}
	writeST(t, filepath.Join(dir, "model.safetensors"), names, dts, shapes, data)
	q := ""
	if quantized {
		q = `"quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},`
	}
	conf := fmt.Sprintf(`{"architectures": ["GptOssForCausalLM"], "attention_bias": true, "head_dim": %d, "hidden_act": "silu",
	"hidden_size": %d, "initial_context_length": 64, "intermediate_size": %d, "max_position_embeddings": 256, "model_type": "gpt_oss",
	"num_attention_heads": %d, "num_experts_per_tok": 2, "num_hidden_layers": %d, "num_key_value_heads": %d,
	"num_local_experts": %d, %s "rms_norm_eps": 1e-05,
	"rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 64, "rope_type": "yarn", "truncate": false},
	"rope_theta": 150000, "sliding_window": 8, "swiglu_limit": 7.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": %d}`,
		gtHD, gtH, gtI, gtHeads, gtL, gtKV, gtE, q, gtV)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDiffGGUFGptOss: a tiny gpt-oss release, MXFP4 and bfloat16,
// converted by ckpt convert to GGUF (default types, --gguf-type f32 and
// bf16) compares with its source without flags: every tensor of the file
// in exactly one pair and none on one side only (gate_up_proj and its
// bias as two pairs each, named after the GGUF tensors, the expert
// weights read transposed), every pair equal in value (--atol 0 holds),
// the MXFP4 experts equal in bits whatever the output type (the GGUF's
// copied MXFP4 blocks and the release's decode to the same float32s),
// the note saying what was mapped; the same with the GGUF file as A; and
// `ckpt verify DIR out.gguf` OK.
func TestDiffGGUFGptOss(t *testing.T) {
	for _, quantized := range []bool{true, false} {
		dir := t.TempDir()
		writeTinyGptOss(t, dir, quantized, false, 3)
		for _, typ := range []string{"", "f32", "bf16"} {
			what := fmt.Sprintf("quantized %v, --gguf-type %q", quantized, typ)
			out := filepath.Join(t.TempDir(), "out.gguf")
			args := []string{"convert", dir, out}
			if typ != "" {
				args = append(args, "--gguf-type", typ)
			}
			if code, text, errs := runCLI(t, args...); code != exitOK {
				t.Fatalf("%s: convert: exit %d %s %s", what, code, text, errs)
			}
			f, _ := parseGGUF(t, out)
			code, rep := runDiffJSON(t, dir, out, "--atol", "0")
			if code != exitOK || !rep.OK || len(rep.OnlyInA)+len(rep.OnlyInB) != 0 || len(rep.Tensors) != len(f.Tensors) {
				t.Fatalf("%s: exit %d, only in A %v, only in B %v, %d pairs for %d GGUF tensors", what, code, rep.OnlyInA, rep.OnlyInB, len(rep.Tensors), len(f.Tensors))
			}
			pairs := map[string]int{}
			for _, td := range rep.Tensors {
				pairs[td.Name]++
				if td.Problem != "" || td.Differing != 0 {
					t.Errorf("%s: %s: problem %q, %d elements differ", what, td.Name, td.Problem, td.Differing)
				}
				wantVia := ""
				switch {
				case strings.Contains(td.Name, "ffn_gate_exps."):
					wantVia = "even outputs"
				case strings.Contains(td.Name, "ffn_up_exps."):
					wantVia = "odd outputs"
				}
				if strings.HasSuffix(td.Name, "_exps.weight") {
					wantVia = strings.TrimPrefix(wantVia+", transposed", ", ")
					if quantized && td.DTypeB == "float32" {
						wantVia += ", MXFP4 decoded as float32"
					}
					src := "down_proj"
					if !strings.Contains(td.Name, "down") {
						src = "gate_up_proj"
					}
					if !strings.HasSuffix(td.NameA, ".mlp.experts."+src) {
						t.Errorf("%s: %s paired with %q", what, td.Name, td.NameA)
					}
					// MXFP4 experts: the same blocks, the same bits; a
					// bfloat16 release's: bits where the file kept bfloat16.
					if want := quantized || td.DTypeB == "bfloat16"; td.BitwiseEqual != want {
						t.Errorf("%s: %s (%s vs %s): bitwise equal %v, want %v", what, td.Name, td.DTypeA, td.DTypeB, td.BitwiseEqual, want)
					}
				}
				if td.Via != wantVia {
					t.Errorf("%s: %s: via %q, want %q", what, td.Name, td.Via, wantVia)
				}
			}
			for _, ti := range f.Tensors {
				if pairs[ti.Name] != 1 {
					t.Errorf("%s: GGUF tensor %s in %d pairs", what, ti.Name, pairs[ti.Name])
				}
			}
			note := fmt.Sprintf("B is a GGUF file of architecture gpt-oss: %d tensors of A matched by llama.cpp's names (as ckpt convert writes them), %d split into gate/up halves", gtHF, 2*gtL)
			transposed := fmt.Sprintf(", %d expert weights read transposed", 2*gtL)
			mx := quantized && typ != "bf16"
			if len(rep.Notes) != 1 || !strings.HasPrefix(rep.Notes[0], note) || !strings.Contains(rep.Notes[0], transposed) ||
				strings.Contains(rep.Notes[0], fmt.Sprintf(", %d of them MXFP4 decoded as float32", 2*gtL)) != mx {
				t.Errorf("%s: notes %q", what, rep.Notes)
			}
			if code, text, errs := runCLI(t, "verify", dir, out); code != exitOK || !strings.Contains(text, fmt.Sprintf("%d tensors compared", len(f.Tensors))) {
				t.Errorf("%s: verify DIR out.gguf: exit %d\n%s%s", what, code, text, errs)
			}
			if typ != "" {
				continue
			}
			code, rev := runDiffJSON(t, out, dir, "--atol", "0")
			if code != exitOK || len(rev.OnlyInA)+len(rev.OnlyInB) != 0 || len(rev.Tensors) != len(f.Tensors) ||
				len(rev.Notes) != 1 || !strings.HasPrefix(rev.Notes[0], "A is a GGUF file of architecture gpt-oss") {
				t.Errorf("%s: diff out.gguf DIR: exit %d, only %v %v, %d pairs, notes %q", what, code, rev.OnlyInA, rev.OnlyInB, len(rev.Tensors), rev.Notes)
			}
		}
	}

	// E2M1's -0 (code 8) in the blocks: ggml reads +0.0 where transformers
	// reads -0.0, so the copied experts are equal in value, not in bits;
	// verify, which compares values across its float32 reading, passes.
	dir := t.TempDir()
	writeTinyGptOss(t, dir, true, true, 4)
	out := filepath.Join(t.TempDir(), "out.gguf")
	if code, text, errs := runCLI(t, "convert", dir, out); code != exitOK {
		t.Fatalf("convert: exit %d %s %s", code, text, errs)
	}
	code, rep := runDiffJSON(t, dir, out, "--atol", "0")
	experts := 0
	for _, td := range rep.Tensors {
		if strings.HasSuffix(td.Name, "_exps.weight") {
			experts++
			if td.BitwiseEqual || td.Differing != 0 {
				t.Errorf("-0 codes: %s: bitwise equal %v, %d differ; want equal values in other bits", td.Name, td.BitwiseEqual, td.Differing)
			}
		}
	}
	if code != exitOK || experts != 3*gtL {
		t.Errorf("-0 codes: exit %d, %d expert pairs", code, experts)
	}
	if code, text, errs := runCLI(t, "verify", dir, out); code != exitOK {
		t.Errorf("-0 codes: verify: exit %d\n%s%s", code, text, errs)
	}
}

// TestDiffGGUFGptOssTampered: one element changed in a GGUF file ckpt
// convert wrote shows in its pair only, at its index: a nibble of an
// MXFP4 block of ffn_up_exps (gate_up_proj's odd outputs) and a bfloat16
// element of ffn_gate_exps (its even outputs, from the bfloat16
// release). diff counts one differing element in that pair and keeps the
// other half bitwise equal; verify fails naming the source tensor's half
// and the flat index.
func TestDiffGGUFGptOssTampered(t *testing.T) {
	for _, c := range []struct {
		quantized   bool
		args        []string
		tensor      string
		byteAt, bit int
		index       int64 // the flat index of the element changed
		other       string
		half        string
	}{
		// MXFP4: block 37 is 1 exponent byte and 16 bytes of nibbles; the
		// low nibble of nibble byte 3 is the block's element 3.
		{true, nil, "blk.1.ffn_up_exps.weight", 37*17 + 1 + 3, 0, 37*32 + 3, "blk.1.ffn_gate_exps.weight", "odd outputs"},
		{false, []string{"--gguf-type", "bf16"}, "blk.0.ffn_gate_exps.weight", 2 * 1000, 2, 1000, "blk.0.ffn_up_exps.weight", "even outputs"},
	} {
		dir := t.TempDir()
		writeTinyGptOss(t, dir, c.quantized, false, 5)
		out := filepath.Join(t.TempDir(), "out.gguf")
		if code, text, errs := runCLI(t, append([]string{"convert", dir, out}, c.args...)...); code != exitOK {
			t.Fatalf("convert: exit %d %s %s", code, text, errs)
		}
		f, b := parseGGUF(t, out)
		tensorData(f, b, c.tensor)[c.byteAt] ^= 1 << c.bit
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
		code, rep := runDiffJSON(t, dir, out, "--atol", "0")
		if code != exitError || len(rep.OnlyInA)+len(rep.OnlyInB) != 0 {
			t.Fatalf("%s: exit %d, only %v %v", c.tensor, code, rep.OnlyInA, rep.OnlyInB)
		}
		for _, td := range rep.Tensors {
			want := int64(0)
			if td.Name == c.tensor {
				want = 1
			}
			if td.Differing != want || (td.Name == c.other && !td.BitwiseEqual) {
				t.Errorf("tampered %s: %s: %d differ (bitwise %v), want %d", c.tensor, td.Name, td.Differing, td.BitwiseEqual, want)
			}
		}
		code, text, _ := runCLI(t, "verify", dir, out)
		l := 0
		if c.quantized {
			l = 1
		}
		want := fmt.Sprintf("model.layers.%d.mlp.experts.gate_up_proj (%s)", l, c.half)
		if code != exitError || strings.Count(text, "elements differ") != 1 || !strings.Contains(text, want) ||
			!strings.Contains(text, fmt.Sprintf("first at flat index %d,", c.index)) {
			t.Errorf("verify tampered %s: exit %d, want one difference in %q at %d:\n%s", c.tensor, code, want, c.index, text)
		}
	}
}
