package convert

import (
	"fmt"
	"math"
	"strings"

	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/internal/llamacpp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// gpt-oss (GptOssForCausalLM) into a GGUF output, as llama.cpp's
// convert_hf_to_gguf.py (GptOssModel) writes it and llama.cpp's loader
// (LLM_ARCH_OPENAI_MOE, general.architecture "gpt-oss") reads it:
//
//   - names from llamacpp.Archs["gpt-oss"]: the attention as Llama's with
//     biases, self_attn.sinks as attn_sinks.weight,
//     post_attention_layernorm as post_attention_norm, the router as
//     ffn_gate_inp, experts.down_proj as ffn_down_exps;
//   - experts.gate_up_proj, whose outputs interleave gate and up, split
//     into ffn_gate_exps (outputs 0, 2, 4, ...) and ffn_up_exps (1, 3,
//     5, ...), and gate_up_proj_bias likewise along its last dimension;
//   - the expert weights in llama.cpp's orientation [experts, out, in]:
//     an MXFP4 release's stored blocks already are (the halves of
//     gate_up_proj take every other stored row, gguf_mxfp4.go); a float
//     release's transformers layout [experts, in, out] is read through a
//     transposed view;
//   - besides the common hyperparameters, expert_count,
//     expert_used_count, expert_feed_forward_length,
//     attention.sliding_window, key_length/value_length (head_dim) and
//     YaRN rope scaling (rope.scaling.type yarn, factor,
//     original_context_length, yarn_beta_fast/slow, ...);
//   - llama.cpp's float rule even without WithGGUFType: 1-D tensors,
//     norms, the router and every tensor not named ".weight" (biases,
//     stacked 2-D expert biases included) are F32, which llama.cpp's
//     kernels require (ggml_add_id and the attention sinks take F32
//     only).

// gptOssKVs returns the gpt-oss hyperparameters beyond the common ones.
// The loader requires the expert counts, the expert width and the sliding
// window, so a config.json without them is refused.
func gptOssKVs(cfg map[string]any) ([]gguf.KV, error) {
	const arch = "gpt-oss"
	var out []gguf.KV
	for _, e := range []struct {
		key      string
		keys     []string
		required bool
	}{
		{"expert_count", []string{"num_local_experts", "num_experts"}, true},
		{"expert_used_count", []string{"num_experts_per_tok", "num_experts_per_token"}, true},
		{"expert_feed_forward_length", []string{"intermediate_size"}, true},
		{"attention.sliding_window", []string{"sliding_window"}, true},
		{"attention.key_length", []string{"head_dim"}, false},
		{"attention.value_length", []string{"head_dim"}, false},
	} {
		found := false
		for _, k := range e.keys {
			v, ok := cfg[k].(float64)
			if !ok {
				continue
			}
			if v < 0 || v > math.MaxUint32 || v != math.Trunc(v) {
				return nil, fmt.Errorf("%s (for %s.%s): %v is not a uint32", k, arch, e.key, v)
			}
			out = append(out, gguf.KV{Key: arch + "." + e.key, Type: gguf.TypeUint32, Value: uint32(v)})
			found = true
			break
		}
		if !found && e.required {
			return nil, fmt.Errorf("no %v: llama.cpp's gpt-oss loader needs %s.%s", e.keys, arch, e.key)
		}
	}
	return out, nil
}

// yarnKVs returns the rope.scaling entries llama.cpp's converter writes
// for rope_type yarn (TextModel.set_gguf_parameters).
func yarnKVs(arch string, rs map[string]any) ([]gguf.KV, error) {
	factor, ok := rs["factor"].(float64)
	if !ok {
		return nil, nil // upstream writes nothing without a factor
	}
	orig, ok := rs["original_max_position_embeddings"].(float64)
	if !ok || orig < 0 || orig > math.MaxUint32 || orig != math.Trunc(orig) {
		return nil, fmt.Errorf("rope_scaling yarn: original_max_position_embeddings %v is not a uint32", rs["original_max_position_embeddings"])
	}
	out := []gguf.KV{
		{Key: arch + ".rope.scaling.type", Type: gguf.TypeString, Value: "yarn"},
		{Key: arch + ".rope.scaling.factor", Type: gguf.TypeFloat32, Value: float32(factor)},
		{Key: arch + ".rope.scaling.original_context_length", Type: gguf.TypeUint32, Value: uint32(orig)},
	}
	for _, e := range []struct{ key, from, alt string }{
		{"yarn_ext_factor", "extrapolation_factor", ""},
		{"yarn_attn_factor", "attention_factor", "attn_factor"},
		{"yarn_beta_fast", "beta_fast", ""},
		{"yarn_beta_slow", "beta_slow", ""},
	} {
		v, ok := rs[e.from].(float64)
		if !ok && e.alt != "" {
			v, ok = rs[e.alt].(float64)
		}
		if ok {
			out = append(out, gguf.KV{Key: arch + ".rope.scaling." + e.key, Type: gguf.TypeFloat32, Value: float32(v)})
		}
	}
	return out, nil
}

// ggufExpand applies the architecture's splits and transpositions to the
// items of a GGUF output: a split tensor becomes two items (its even and
// odd halves), an expert weight in transformers' layout is read through a
// transposed view. Stored MXFP4 weights keep their source (their blocks
// are in llama.cpp's orientation already); their halves are recorded in
// halves, read by ggufOutType.
func (c *config) ggufExpand(items []*item) ([]*item, error) {
	a := c.ggufArch
	if a == nil || a.table == nil || (len(a.table.Splits) == 0 && a.table.Transposed() == nil) {
		return items, nil
	}
	tr := a.table.Transposed()
	out := make([]*item, 0, len(items))
	splits := 0
	defer func() {
		if splits > 0 {
			a.report.Notes = append(a.report.Notes, fmt.Sprintf("%d tensors split in two as llama.cpp's converter splits them (gate_up_proj into ffn_gate_exps and ffn_up_exps, its bias likewise): the file holds %d tensors", splits, len(out)))
		}
	}()
	for _, it := range items {
		mx := ggufMXFP4Source(it.src) != nil
		even, odd, split := a.table.SplitOf(it.name)
		if !split {
			if tr != nil && tr.MatchString(it.name) && !mx {
				v, err := expertView(it.src, -1)
				if err != nil {
					return nil, &TensorError{Name: it.name, Err: err}
				}
				cp := *it
				cp.src = v
				it = &cp
			}
			out = append(out, it)
			continue
		}
		splits++
		for parity, name := range []string{even, odd} {
			h := *it
			h.name = name
			var err error
			switch {
			case mx:
				if a.halves == nil {
					a.halves = map[*item]int{}
				}
				a.halves[&h] = parity
			case tr != nil && tr.MatchString(name):
				h.src, err = expertView(it.src, parity)
			default:
				h.src, err = lastHalfView(it.src, parity)
			}
			if err != nil {
				return nil, &TensorError{Name: it.name, Err: err}
			}
			out = append(out, &h)
		}
	}
	return out, nil
}

// expertView returns a stacked expert weight [E, in, out] (transformers'
// layout) as llama.cpp's [E, out, in], a view over its storage; with
// parity 0 or 1, only the even or odd outputs (llamacpp.ExpertView).
func expertView(t *statedict.Tensor, parity int) (*statedict.Tensor, error) {
	return viewOf(t)(llamacpp.ExpertView(t.Shape, t.Strides, parity))
}

// lastHalfView returns the even or odd (parity 0 or 1) indices of t's last
// dimension, a view over its storage (llamacpp.HalfView).
func lastHalfView(t *statedict.Tensor, parity int) (*statedict.Tensor, error) {
	return viewOf(t)(llamacpp.HalfView(t.Shape, t.Strides, parity))
}

// viewOf returns a function making a view of t from a shape, strides and
// added offset.
func viewOf(t *statedict.Tensor) func([]int64, []int64, int64, error) (*statedict.Tensor, error) {
	return func(shape, strides []int64, off int64, err error) (*statedict.Tensor, error) {
		if err != nil {
			return nil, err
		}
		v := *t
		v.Shape, v.Strides, v.Offset = shape, strides, t.Offset+off
		return &v, nil
	}
}

// ggufF32 says why an item is written as F32 under llama.cpp's converter
// rules ("" when it is not): 1-D tensors and norms; for an architecture
// with llama.cpp's names, also routers (ffn_gate_inp.weight) and every
// llama.cpp-named tensor not ending in ".weight" (biases).
func (c *config) ggufF32(it *item) string {
	switch {
	case len(it.src.Shape) <= 1:
		return "1-D tensors stay F32 (llama.cpp's rule)"
	case strings.HasSuffix(it.name, "norm.weight"):
		return "norms stay F32 (llama.cpp's rule)"
	}
	if c.ggufArch == nil || c.ggufArch.table == nil {
		return ""
	}
	switch {
	case strings.HasSuffix(it.name, ".ffn_gate_inp.weight"):
		return "routers stay F32 (llama.cpp's rule)"
	case strings.HasPrefix(it.name, "blk.") && !strings.HasSuffix(it.name, ".weight"):
		return "only .weight tensors are quantized (llama.cpp's rule)"
	}
	return ""
}

// f32Always reports whether llama.cpp's F32 rule applies without
// WithGGUFType too: gpt-oss, whose kernels take F32 biases and sinks only.
func (a *hfArch) f32Always() bool { return a != nil && a.arch == "gpt-oss" }
