// Package llamacpp holds what llama.cpp's convert_hf_to_gguf.py does to a
// Hugging Face model, spelled once per architecture in Archs (arch.go):
// the tensor names it gives, the tensors it splits in two (gpt-oss's
// gate/up), the expert weights it transposes and the q/k row permutation
// (Llama). ckpt convert applies them when it writes a GGUF file; ckpt
// diff and verify apply them again to compare such a file with its
// source. An architecture is mapped when Archs has it, and its q/k rows
// are permuted when its Permute is set.
package llamacpp

import (
	"fmt"
	"regexp"
	"sync"
)

// llamaNames are llama.cpp's names for the Llama family's tensors
// (Archs["llama"] and Archs["qwen2"]).
var llamaNames = []Rule{
	{`^model\.embed_tokens\.weight$`, "token_embd.weight"},
	{`^model\.norm\.weight$`, "output_norm.weight"},
	{`^lm_head\.weight$`, "output.weight"},
	{`^model\.layers\.(\d+)\.self_attn\.q_proj\.(weight|bias)$`, "blk.$1.attn_q.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.k_proj\.(weight|bias)$`, "blk.$1.attn_k.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.v_proj\.(weight|bias)$`, "blk.$1.attn_v.$2"},
	{`^model\.layers\.(\d+)\.self_attn\.o_proj\.(weight|bias)$`, "blk.$1.attn_output.$2"},
	{`^model\.layers\.(\d+)\.mlp\.gate_proj\.weight$`, "blk.$1.ffn_gate.weight"},
	{`^model\.layers\.(\d+)\.mlp\.up_proj\.weight$`, "blk.$1.ffn_up.weight"},
	{`^model\.layers\.(\d+)\.mlp\.down_proj\.weight$`, "blk.$1.ffn_down.weight"},
	{`^model\.layers\.(\d+)\.input_layernorm\.weight$`, "blk.$1.attn_norm.weight"},
	{`^model\.layers\.(\d+)\.post_attention_layernorm\.weight$`, "blk.$1.ffn_norm.weight"},
}

// Top are llama.cpp's names of the tensors outside the blocks.
var Top = []string{"token_embd.weight", "output_norm.weight", "output.weight"}

// QK returns the regexp of llama.cpp's names of the tensors it permutes;
// group 1 is "q" or "k". It is compiled on first use, not at start-up.
func QK() *regexp.Regexp { return qk() }

var qk = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^blk\.\d+\.attn_([qk])\.(weight|bias)$`) })

// Permute returns the shape and strides of a view of a tensor (shape,
// strides in elements) whose elements, in C order, are its rows in
// llama.cpp's order: t.reshape(heads, 2, rows/heads/2, rest...)
// .swapaxes(1, 2), as shape [heads, rows/heads/2, 2, rest...].
func Permute(shape, strides []int64, heads int64) ([]int64, []int64, error) {
	if len(shape) == 0 || len(strides) != len(shape) || heads <= 0 || shape[0]%(2*heads) != 0 {
		return nil, nil, fmt.Errorf("%v rows cannot be split into %d heads of an even size (q/k permutation)", shape, heads)
	}
	half := shape[0] / heads / 2
	s0 := strides[0]
	return append([]int64{heads, half, 2}, shape[1:]...),
		append([]int64{2 * half * s0, s0, half * s0}, strides[1:]...), nil
}
