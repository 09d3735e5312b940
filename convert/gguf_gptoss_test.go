package convert

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Tiny gpt-oss dimensions: gpt-oss-20b's config.json with every size cut
// down (hidden 64 and expert width 64, two MXFP4 groups of 32 a row).
const (
	goH, goI, goE, goHeads, goKV, goHD, goV, goL = 64, 64, 4, 4, 2, 16, 96, 2
)

// gptOssConfig is gpt-oss-20b's config.json, sizes cut down; quantized
// adds its quantization_config.
func gptOssConfig(quantized bool) string {
	q := ""
	if quantized {
		q = `"quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"], "quant_method": "mxfp4"},`
	}
	return fmt.Sprintf(`{"architectures": ["GptOssForCausalLM"], "attention_bias": true, "attention_dropout": 0.0,
	"eos_token_id": 200002, "experts_per_token": 2, "head_dim": %d, "hidden_act": "silu", "hidden_size": %d,
	"initial_context_length": 64, "initializer_range": 0.02, "intermediate_size": %d,
	"layer_types": ["sliding_attention", "full_attention"], "max_position_embeddings": 256, "model_type": "gpt_oss",
	"num_attention_heads": %d, "num_experts_per_tok": 2, "num_hidden_layers": %d, "num_key_value_heads": %d,
	"num_local_experts": %d, "output_router_logits": false, "pad_token_id": 95, %s "rms_norm_eps": 1e-05,
	"rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 64, "rope_type": "yarn", "truncate": false},
	"rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 8, "swiglu_limit": 7.0,
	"tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": %d}`,
		goHD, goH, goI, goHeads, goL, goKV, goE, q, goV)
}

// gptOssModel is a tiny gpt-oss model: the float tensors (bfloat16 values
// held as float32) and the experts' MXFP4 blocks and scales in the stored
// orientation ([E, out, in/32, 16] and [E, out, in/32]).
type gptOssModel struct {
	dense          map[string][]float32
	shapes         map[string][]int64
	blocks, scales map[string][]byte // by "L.gate_up_proj" / "L.down_proj"
}

func newGptOssModel(seed int64) *gptOssModel {
	r := rand.New(rand.NewSource(seed))
	m := &gptOssModel{dense: map[string][]float32{}, shapes: map[string][]int64{}, blocks: map[string][]byte{}, scales: map[string][]byte{}}
	add := func(name string, shape ...int64) {
		n := int64(1)
		for _, s := range shape {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			x := float32(r.NormFloat64() * 0.1)
			if strings.HasSuffix(name, "norm.weight") {
				x += 1
			}
			v[i] = bf16RNE(x)
		}
		m.dense[name], m.shapes[name] = v, shape
	}
	add("model.embed_tokens.weight", goV, goH)
	add("model.norm.weight", goH)
	add("lm_head.weight", goV, goH)
	for l := range goL {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", goH)
		add(p+"post_attention_layernorm.weight", goH)
		add(p+"self_attn.q_proj.weight", goHeads*goHD, goH)
		add(p+"self_attn.q_proj.bias", goHeads*goHD)
		add(p+"self_attn.k_proj.weight", goKV*goHD, goH)
		add(p+"self_attn.k_proj.bias", goKV*goHD)
		add(p+"self_attn.v_proj.weight", goKV*goHD, goH)
		add(p+"self_attn.v_proj.bias", goKV*goHD)
		add(p+"self_attn.o_proj.weight", goH, goHeads*goHD)
		add(p+"self_attn.o_proj.bias", goH)
		add(p+"self_attn.sinks", goHeads)
		add(p+"mlp.router.weight", goE, goH)
		add(p+"mlp.router.bias", goE)
		add(p+"mlp.experts.gate_up_proj_bias", goE, 2*goI)
		add(p+"mlp.experts.down_proj_bias", goE, goH)
		for _, e := range []struct {
			name     string
			out, in_ int64
		}{{"gate_up_proj", 2 * goI, goH}, {"down_proj", goH, goI}} {
			n := goE * e.out * e.in_ / 32
			blk := make([]byte, 16*n)
			r.Read(blk)
			sc := make([]byte, n)
			for i := range sc {
				sc[i] = byte(121 + r.Intn(4)) // 2^-6 .. 2^-3
			}
			m.blocks[fmt.Sprint(l, ".", e.name)], m.scales[fmt.Sprint(l, ".", e.name)] = blk, sc
		}
	}
	return m
}

// write writes the model into dir as gpt-oss is released: MXFP4 experts
// (`_blocks`, `_scales`) when quantized, else bfloat16 experts in
// transformers' layout ([E, in, out], as the BF16 conversions of gpt-oss
// hold them).
func (m *gptOssModel) write(t *testing.T, dir string, quantized bool) string {
	t.Helper()
	var ts []rawTensor
	for name, v := range m.dense {
		ts = append(ts, rawTensor{name, "BF16", m.shapes[name], bf16Bytes(v)})
	}
	for l := range goL {
		p := fmt.Sprintf("model.layers.%d.mlp.experts.", l)
		for _, e := range []struct {
			name     string
			out, in_ int64
		}{{"gate_up_proj", 2 * goI, goH}, {"down_proj", goH, goI}} {
			blk, sc := m.blocks[fmt.Sprint(l, ".", e.name)], m.scales[fmt.Sprint(l, ".", e.name)]
			if quantized {
				ts = append(ts, rawTensor{p + e.name + "_blocks", "U8", []int64{goE, e.out, e.in_ / 32, 16}, blk},
					rawTensor{p + e.name + "_scales", "U8", []int64{goE, e.out, e.in_ / 32}, sc})
				continue
			}
			v := mxfp4Expected(blk, sc) // [E, out, in]
			tr := make([]float32, len(v))
			for x := range goE {
				for o := range e.out {
					for i := range e.in_ {
						tr[(int64(x)*e.in_+i)*e.out+o] = v[(int64(x)*e.out+o)*e.in_+i]
					}
				}
			}
			ts = append(ts, rawTensor{p + e.name, "BF16", []int64{goE, e.in_, e.out}, bf16Bytes(tr)})
		}
	}
	slices.SortFunc(ts, func(a, b rawTensor) int { return strings.Compare(a.name, b.name) })
	return writeRelease(t, dir, gptOssConfig(quantized), ts)
}

// rowsOf returns the rows of one parity (0 even, 1 odd; -1 all) of v held
// as rows of rowLen items (the rows of every expert in turn: an even
// count per expert keeps the parity per expert).
func rowsOf[T any](v []T, rowLen, parity int) []T {
	if parity < 0 {
		return v
	}
	var out []T
	for r := 0; r*rowLen < len(v); r++ {
		if r%2 == parity {
			out = append(out, v[r*rowLen:(r+1)*rowLen]...)
		}
	}
	return out
}

// gptOssGGUF converts the release at p with its directory's config.json.
func gptOssGGUF(t *testing.T, p string, opts ...Option) (*Summary, *gguf.File, []byte) {
	t.Helper()
	ck, err := statedict.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "out.gguf")
	sum, err := Convert(context.Background(), ck, out, append([]Option{WithFormat(GGUF), WithHFModelDir(filepath.Dir(p))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f, b := readGGUFFile(t, out)
	return sum, f, b
}

// TestGGUFGptOss: a tiny gpt-oss release (gpt-oss-20b's config.json cut
// down) converted to GGUF has what llama.cpp's convert_hf_to_gguf.py
// (GptOssModel, with TextModel.set_gguf_parameters and gguf-py's tensor
// names) writes and what llama.cpp's loader asks for (llama-model.cpp,
// LLM_ARCH_OPENAI_MOE: load_hparams reads expert_feed_forward_length and
// attention.sliding_window, load_tensors creates the tensors below with
// these ggml dims): the names, the dims, the types (MXFP4 experts copied;
// 1-D tensors, norms, the router and biases F32, as the converter's
// prepare_tensors rules and ggml's F32-only add_id and sinks need), the
// gate/up split (gate = rows 0, 2, 4, ... of the stored gate_up_proj, up
// = rows 1, 3, 5, ...; the biases likewise), and the hyperparameters.
// The same model released in bfloat16 (experts in transformers' [E, in,
// out] layout) gives the same expert tensors, bit for bit, as the MXFP4
// release dequantized with --gguf-type bf16: the transposed strided view
// and the stored-row selection agree.
func TestGGUFGptOss(t *testing.T) {
	m := newGptOssModel(7)
	mx := m.write(t, t.TempDir(), true)
	sum, f, b := gptOssGGUF(t, mx)

	want := map[string][]uint64{ // llama-model.cpp's create_tensor dims
		"token_embd.weight": {goH, goV}, "output_norm.weight": {goH}, "output.weight": {goH, goV},
	}
	for l := range goL {
		for n, d := range map[string][]uint64{
			"attn_norm.weight": {goH}, "post_attention_norm.weight": {goH},
			"attn_q.weight": {goH, goHeads * goHD}, "attn_k.weight": {goH, goKV * goHD}, "attn_v.weight": {goH, goKV * goHD},
			"attn_output.weight": {goHeads * goHD, goH}, "attn_sinks.weight": {goHeads},
			"ffn_gate_inp.weight": {goH, goE}, "ffn_gate_exps.weight": {goH, goI, goE},
			"ffn_down_exps.weight": {goI, goH, goE}, "ffn_up_exps.weight": {goH, goI, goE},
			"attn_q.bias": {goHeads * goHD}, "attn_k.bias": {goKV * goHD}, "attn_v.bias": {goKV * goHD}, "attn_output.bias": {goH},
			"ffn_gate_inp.bias": {goE}, "ffn_gate_exps.bias": {goI, goE}, "ffn_down_exps.bias": {goH, goE}, "ffn_up_exps.bias": {goI, goE},
		} {
			want[fmt.Sprintf("blk.%d.%s", l, n)] = d
		}
	}
	got := map[string]gguf.TensorInfo{}
	for _, ti := range f.Tensors {
		got[ti.Name] = ti
	}
	for n, d := range want {
		ti, ok := got[n]
		if !ok {
			t.Errorf("no %s", n)
			continue
		}
		if !slices.Equal(ti.Dims, d) {
			t.Errorf("%s: dims %v, want %v", n, ti.Dims, d)
		}
		typ := ggml.BF16 // 2-D weights keep the release's bfloat16
		switch {
		case strings.HasSuffix(n, "_exps.weight"):
			typ = ggml.MXFP4
		case len(d) == 1 || strings.HasSuffix(n, ".bias") || strings.Contains(n, "gate_inp") || strings.HasSuffix(n, "norm.weight"):
			typ = ggml.F32
		}
		if ti.Type != typ {
			t.Errorf("%s: type %s, want %s", n, ti.Type, typ)
		}
	}
	if len(got) != len(want) {
		var extra []string
		for n := range got {
			if want[n] == nil {
				extra = append(extra, n)
			}
		}
		t.Errorf("%d tensors, want %d; not llama.cpp's: %v", len(got), len(want), extra)
	}

	// Metadata: TextModel.set_gguf_parameters (context, embedding, block
	// count, feed forward, heads, YaRN, rope theta, rms eps, experts,
	// head_dim as key/value length) and GptOssModel's sliding window and
	// expert feed forward length.
	wantKV := map[string]any{
		"general.architecture": "gpt-oss", "gpt-oss.context_length": uint32(256), "gpt-oss.embedding_length": uint32(goH),
		"gpt-oss.block_count": uint32(goL), "gpt-oss.feed_forward_length": uint32(goI),
		"gpt-oss.attention.head_count": uint32(goHeads), "gpt-oss.attention.head_count_kv": uint32(goKV),
		"gpt-oss.rope.scaling.type": "yarn", "gpt-oss.rope.scaling.factor": float32(32),
		"gpt-oss.rope.scaling.original_context_length": uint32(64), "gpt-oss.rope.scaling.yarn_beta_fast": float32(32),
		"gpt-oss.rope.scaling.yarn_beta_slow": float32(1), "gpt-oss.rope.freq_base": float32(150000),
		"gpt-oss.attention.layer_norm_rms_epsilon": float32(1e-5), "gpt-oss.expert_count": uint32(goE),
		"gpt-oss.expert_used_count": uint32(2), "gpt-oss.attention.key_length": uint32(goHD),
		"gpt-oss.attention.value_length": uint32(goHD), "gpt-oss.attention.sliding_window": uint32(8),
		"gpt-oss.expert_feed_forward_length": uint32(goI), "gpt-oss.vocab_size": uint32(goV),
		"tokenizer.ggml.model": "none",
	}
	for k, v := range wantKV {
		kv, ok := f.Get(k)
		if !ok || !reflect.DeepEqual(kv.Value, v) {
			t.Errorf("%s = %v (%v), want %v", k, kv.Value, ok, v)
		}
	}
	if _, ok := f.Get("gpt-oss.rope.dimension_count"); ok {
		t.Error("rope.dimension_count written: upstream writes it for llama only")
	}
	if g := sum.GGUF; g == nil || g.Architecture != "gpt-oss" || !g.Mapped || g.HFArchitecture != "GptOssForCausalLM" || len(g.Notes) != 2 ||
		g.Notes[1] != fmt.Sprintf("%d tensors split in two as llama.cpp's converter splits them (gate_up_proj into ffn_gate_exps and ffn_up_exps, its bias likewise): the file holds %d tensors", 2*goL, len(want)) {
		t.Errorf("report %+v", sum.GGUF)
	}

	// Data: the experts are llama.cpp's repack of the stored rows, the
	// gate the even rows, up the odd ones; the biases split alike.
	for l := range goL {
		for _, e := range []struct {
			gguf, src string
			parity    int
		}{{"ffn_gate_exps", "gate_up_proj", 0}, {"ffn_up_exps", "gate_up_proj", 1}, {"ffn_down_exps", "down_proj", -1}} {
			blk, sc := m.blocks[fmt.Sprint(l, ".", e.src)], m.scales[fmt.Sprint(l, ".", e.src)]
			g := 2 // groups a row
			blk, sc = rowsOf(blk, 16*g, e.parity), rowsOf(sc, g, e.parity)
			var wantB []byte
			for i, s := range sc {
				wantB = append(wantB, llamaCppRepack(blk[16*i:16*i+16], s)...)
			}
			name := fmt.Sprintf("blk.%d.%s.weight", l, e.gguf)
			if !bytes.Equal(ggufData(f, b, name), wantB) {
				t.Errorf("%s: not llama.cpp's repack of the stored rows (parity %d)", name, e.parity)
			}
		}
		bias := m.dense[fmt.Sprintf("model.layers.%d.mlp.experts.gate_up_proj_bias", l)]
		for parity, n := range []string{"ffn_gate_exps", "ffn_up_exps"} {
			var w []float32
			for i := parity; i < len(bias); i += 2 {
				w = append(w, bias[i])
			}
			if name := fmt.Sprintf("blk.%d.%s.bias", l, n); !bytes.Equal(ggufData(f, b, name), f32le(w)) {
				t.Errorf("%s: not gate_up_proj_bias[..., %d::2]", name, parity)
			}
		}
		for hf, gn := range map[string]string{"self_attn.sinks": "attn_sinks.weight", "mlp.router.weight": "ffn_gate_inp.weight",
			"mlp.experts.down_proj_bias": "ffn_down_exps.bias", "post_attention_layernorm.weight": "post_attention_norm.weight"} {
			if !bytes.Equal(ggufData(f, b, fmt.Sprintf("blk.%d.%s", l, gn)), f32le(m.dense[fmt.Sprintf("model.layers.%d.%s", l, hf)])) {
				t.Errorf("blk.%d.%s: not model.layers.%d.%s as float32", l, gn, l, hf)
			}
		}
	}

	// The MXFP4 release dequantized (--gguf-type bf16) and the bfloat16
	// release: the same expert tensors, the values of the stored rows.
	_, fq, bq := gptOssGGUF(t, mx, WithGGUFType("bf16"))
	fl := m.write(t, t.TempDir(), false)
	_, ff, bf := gptOssGGUF(t, fl)
	for l := range goL {
		for _, e := range []struct {
			gguf, src string
			parity    int
		}{{"ffn_gate_exps", "gate_up_proj", 0}, {"ffn_up_exps", "gate_up_proj", 1}, {"ffn_down_exps", "down_proj", -1}} {
			v := mxfp4Expected(m.blocks[fmt.Sprint(l, ".", e.src)], m.scales[fmt.Sprint(l, ".", e.src)])
			rowLen := goH
			if e.src == "down_proj" {
				rowLen = goI
			}
			w := bf16Bytes(rowsOf(v, rowLen, e.parity))
			name := fmt.Sprintf("blk.%d.%s.weight", l, e.gguf)
			if ti := ggufInfo(t, fq, name); ti.Type != ggml.BF16 || !bytes.Equal(ggufData(fq, bq, name), w) {
				t.Errorf("--gguf-type bf16: %s: %s, or not the stored rows' values (parity %d)", name, ti.Type, e.parity)
			}
			if ti := ggufInfo(t, ff, name); ti.Type != ggml.BF16 || !bytes.Equal(ggufData(ff, bf, name), w) {
				t.Errorf("bfloat16 release: %s: %s, or not transformers' tensor transposed, rows of parity %d", name, ti.Type, e.parity)
			}
		}
	}
	if len(ff.Tensors) != len(want) || len(fq.Tensors) != len(want) {
		t.Errorf("%d and %d tensors, want %d", len(fq.Tensors), len(ff.Tensors), len(want))
	}
}

// TestGGUFGptOssQ8: under --gguf-type q8_0 the MXFP4 experts are copied,
// the bfloat16 release's experts and the 2-D weights quantized, and the
// router, biases (2-D expert biases included), sinks and norms stay F32,
// each named in the report's fallbacks with llama.cpp's rule.
func TestGGUFGptOssQ8(t *testing.T) {
	m := newGptOssModel(8)
	for _, quantized := range []bool{true, false} {
		sum, f, _ := gptOssGGUF(t, m.write(t, t.TempDir(), quantized), WithGGUFType("q8_0"))
		for _, ti := range f.Tensors {
			want := ggml.Q8_0
			switch {
			case strings.HasSuffix(ti.Name, "_exps.weight") && quantized:
				want = ggml.MXFP4
			case len(ti.Dims) == 1 || !strings.HasSuffix(ti.Name, ".weight") || strings.Contains(ti.Name, "gate_inp") || strings.HasSuffix(ti.Name, "norm.weight"):
				want = ggml.F32
			}
			if ti.Type != want {
				t.Errorf("quantized %v: %s: %s, want %s", quantized, ti.Name, ti.Type, want)
			}
		}
		reasons := map[string]int{}
		for _, fb := range sum.GGUFTypes.Fallbacks {
			reasons[fb.Reason] += fb.Tensors
		}
		if reasons["routers stay F32 (llama.cpp's rule)"] != goL || reasons["only .weight tensors are quantized (llama.cpp's rule)"] != 3*goL {
			t.Errorf("quantized %v: fallbacks %+v", quantized, sum.GGUFTypes.Fallbacks)
		}
		if ft, _ := f.Get("general.file_type"); ft.Value != uint32(7) {
			t.Errorf("general.file_type %v", ft.Value)
		}
	}
}

// TestGGUFGptOssConfig: a gpt-oss config.json without what llama.cpp's
// loader requires (the sliding window) is refused before anything is
// written, naming the key.
func TestGGUFGptOssConfig(t *testing.T) {
	m := newGptOssModel(9)
	p := m.write(t, t.TempDir(), true)
	cfg := strings.Replace(gptOssConfig(true), `"sliding_window": 8,`, "", 1)
	if err := os.WriteFile(filepath.Join(filepath.Dir(p), "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	err := gptOssRefused(t, p)
	if err == nil || !strings.Contains(err.Error(), "sliding_window") || !strings.Contains(err.Error(), "gpt-oss.attention.sliding_window") {
		t.Fatalf("err %v", err)
	}
}

// TestGGUFGptOssNaNExponent: an exponent byte of 255 in an odd stored row
// of gate_up_proj (the up half) is refused naming the `_scales` tensor
// and the group's index in the stored tensor, nothing written.
func TestGGUFGptOssNaNExponent(t *testing.T) {
	m := newGptOssModel(10)
	sc := m.scales["1.gate_up_proj"]
	const group = 2*(2*goI) + 2*5 + 1 // expert 2, stored row 5 (up's row 2), group 1
	sc[group] = 255
	p := m.write(t, t.TempDir(), true)
	err := gptOssRefused(t, p)
	want := fmt.Sprintf("model.layers.1.mlp.experts.gate_up_proj_scales: exponent 0xff (E8M0 NaN) in group %d:", group)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err %v, want %q", err, want)
	}
}

// gptOssRefused converts the release at p with its config.json, which
// must fail before anything is written, and returns the error.
func gptOssRefused(t *testing.T, p string) error {
	t.Helper()
	ck, err := statedict.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "out.gguf")
	_, err = Convert(context.Background(), ck, out, WithFormat(GGUF), WithHFModelDir(filepath.Dir(p)))
	if _, serr := os.Stat(out); err == nil || serr == nil {
		t.Errorf("err %v, yet %s written", err, out)
	}
	return err
}
