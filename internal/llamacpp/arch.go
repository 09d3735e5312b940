package llamacpp

import (
	"fmt"
	"regexp"
	"slices"
	"sync"
)

// Arch is llama.cpp's mapping of one architecture's Hugging Face tensors,
// as convert_hf_to_gguf.py writes them and llama.cpp's loader
// (src/llama-arch.cpp, src/llama-model.cpp) reads them.
type Arch struct {
	// Name is general.architecture.
	Name string
	// Names are the one-to-one renames (Rule: a regexp over a Hugging
	// Face name, regexp.ReplaceAllString replacement).
	Names []Rule
	// Splits are the tensors written as two: the even and the odd
	// indices of one dimension.
	Splits []Split
	// TransposedFrom is the regular expression (Transposed compiles it)
	// of llama.cpp's names of the stacked expert weights that
	// transformers holds as [experts, in, out] and llama.cpp as
	// [experts, out, in] (ggml dims {in, out, experts}): written with the
	// last two dimensions swapped, before any split. "" when none are.
	TransposedFrom string
	// Permute is true when q/k rows are permuted (Permute).
	Permute bool

	once          sync.Once
	names, splits []*regexp.Regexp // Names' and Splits' From, compiled (by compiled)
	transposed    *regexp.Regexp   // TransposedFrom compiled, nil when "" (by compiled)
}

// Rule is one rename: From (a regular expression over a Hugging Face
// name) is replaced by To (regexp.ReplaceAllString syntax).
type Rule struct{ From, To string }

// Split is a Hugging Face tensor that llama.cpp writes as two tensors:
// Even gets indices 0, 2, 4, ... and Odd 1, 3, 5, ... of dimension 1 after
// the transposition of Transposed (expert weights, Even and Odd matching
// Transposed), or of the last dimension otherwise (biases).
type Split struct {
	From      string
	Even, Odd string
}

// gptOssNames are llama.cpp's gpt-oss names (GptOssModel in
// convert_hf_to_gguf.py with gguf-py's tensor_mapping.py; the loader's
// LLM_ARCH_OPENAI_MOE in llama-model.cpp): the attention as Llama's plus
// biases and sinks, post_attention_layernorm as post_attention_norm (the
// architecture has no ffn_norm), the router as ffn_gate_inp, down_proj as
// ffn_down_exps.
var gptOssNames = []Rule{
	{`^model\.embed_tokens\.weight$`, "token_embd.weight"},
	{`^model\.norm\.weight$`, "output_norm.weight"},
	{`^lm_head\.weight$`, "output.weight"},
	{`^model\.layers\.(\d+)\.input_layernorm\.weight$`, "blk.$1.attn_norm.weight"},
	{`^model\.layers\.(\d+)\.post_attention_layernorm\.weight$`, "blk.$1.post_attention_norm.weight"},
	{`^model\.layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)$`, "blk.$1.attn_q.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)$`, "blk.$1.attn_k.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)$`, "blk.$1.attn_v.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)$`, "blk.$1.attn_output.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.sinks$`, "blk.$1.attn_sinks.weight"},
	{`^model\.layers\.(\d+)\.mlp\.router\.(weight|bias)$`, "blk.$1.ffn_gate_inp.$2"},
	{`^model\.layers\.(\d+)\.mlp\.experts\.down_proj$`, "blk.$1.ffn_down_exps.weight"},
	{`^model\.layers\.(\d+)\.mlp\.experts\.down_proj_bias$`, "blk.$1.ffn_down_exps.bias"},
}

// gptOssSplits: gpt-oss interleaves gate and up along the output
// dimension (gate_up_proj's even outputs are the gate, the odd ones up:
// GptOssModel.generate_extra_tensors and modify_tensors slice [:, ::2]
// and [:, 1::2], the biases [..., ::2] and [..., 1::2]).
var gptOssSplits = []Split{
	{`^model\.layers\.(\d+)\.mlp\.experts\.gate_up_proj$`, "blk.$1.ffn_gate_exps.weight", "blk.$1.ffn_up_exps.weight"},
	{`^model\.layers\.(\d+)\.mlp\.experts\.gate_up_proj_bias$`, "blk.$1.ffn_gate_exps.bias", "blk.$1.ffn_up_exps.bias"},
}

// Archs are the architectures mapped, by general.architecture. Their
// Names and Splits are compiled on first use (Patterns, Rename, SplitOf):
// compiled when the program started, they were most of this package's
// start-up (5,100 allocations, 0.5 MB, ~3.8 ms of every ckpt command on
// the VM of docs/benchmarks.md, GGUF or not).
var Archs = map[string]*Arch{
	"llama":   {Name: "llama", Names: llamaNames, Permute: true},
	"qwen2":   {Name: "qwen2", Names: llamaNames},
	"gpt-oss": {Name: "gpt-oss", Names: gptOssNames, Splits: gptOssSplits, TransposedFrom: `^blk\.\d+\.ffn_(gate|up|down)_exps\.weight$`},
}

// compiled compiles a's Names and Splits, once.
func (a *Arch) compiled() *Arch {
	a.once.Do(func() {
		for _, n := range a.Names {
			a.names = append(a.names, regexp.MustCompile(n.From))
		}
		for _, s := range a.Splits {
			a.splits = append(a.splits, regexp.MustCompile(s.From))
		}
		if a.TransposedFrom != "" {
			a.transposed = regexp.MustCompile(a.TransposedFrom)
		}
	})
	return a
}

// Transposed returns TransposedFrom compiled (on first use), nil when a
// transposes no tensor.
func (a *Arch) Transposed() *regexp.Regexp { return a.compiled().transposed }

// Patterns returns a's Names compiled, in the same order.
func (a *Arch) Patterns() []*regexp.Regexp { return a.compiled().names }

// Rename returns llama.cpp's name for a Hugging Face name under a's
// one-to-one renames, and whether one matched.
func (a *Arch) Rename(name string) (string, bool) {
	for i, re := range a.compiled().names {
		if re.MatchString(name) {
			return re.ReplaceAllString(name, a.Names[i].To), true
		}
	}
	return name, false
}

// SplitOf returns llama.cpp's two names for a Hugging Face name that a
// splits (the even half first), and whether one of Splits matched.
func (a *Arch) SplitOf(name string) (even, odd string, ok bool) {
	for i, re := range a.compiled().splits {
		if re.MatchString(name) {
			s := a.Splits[i]
			return re.ReplaceAllString(name, s.Even), re.ReplaceAllString(name, s.Odd), true
		}
	}
	return "", "", false
}

// ExpertView returns the shape, strides and added storage offset (in
// elements) of a view of a stacked expert weight in transformers' layout
// [E, in, out] (shape, strides in elements) as llama.cpp holds it,
// [E, out, in]; with parity 0 or 1, of only its even or odd outputs
// ([E, out/2, in]: a Split's halves), else (parity -1) of all.
func ExpertView(shape, strides []int64, parity int) ([]int64, []int64, int64, error) {
	if len(shape) != 3 || len(strides) != 3 {
		return nil, nil, 0, fmt.Errorf("shape %v: a stacked expert weight is [experts, in, out]", shape)
	}
	s := []int64{shape[0], shape[2], shape[1]}
	st := []int64{strides[0], strides[2], strides[1]}
	if parity < 0 {
		return s, st, 0, nil
	}
	if shape[2]%2 != 0 {
		return nil, nil, 0, fmt.Errorf("shape %v: an odd number of outputs cannot interleave gate and up", shape)
	}
	off := int64(parity) * st[1]
	s[1] /= 2
	st[1] *= 2
	return s, st, off, nil
}

// HalfView returns the shape, strides and added storage offset of a view
// of the even or odd (parity 0 or 1) indices of a tensor's last dimension
// (a Split's halves of a bias).
func HalfView(shape, strides []int64, parity int) ([]int64, []int64, int64, error) {
	n := len(shape)
	if n == 0 || len(strides) != n || shape[n-1]%2 != 0 {
		return nil, nil, 0, fmt.Errorf("shape %v: the last dimension must be even to interleave gate and up", shape)
	}
	s, st := slices.Clone(shape), slices.Clone(strides)
	s[n-1] /= 2
	st[n-1] *= 2
	return s, st, int64(parity) * strides[n-1], nil
}
