package ggufcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestOllamaReadsLlama: a Hugging Face Llama directory (llama3 rope
// scaling) converted to a Q8_0 GGUF is read by ollama with llama.cpp's
// tensor names (every tensor of a llama block present, rope_freqs too)
// and the hyperparameters its accessors expect; @huggingface/gguf reads
// the same tensor infos and architecture as ckpt's reader.
func TestOllamaReadsLlama(t *testing.T) {
	dir := t.TempDir()
	shapes := map[string][]int64{"model.embed_tokens.weight": {64, 128}, "model.norm.weight": {128}, "lm_head.weight": {64, 128}}
	for l := range 2 {
		p := fmt.Sprintf("model.layers.%d.", l)
		for n, s := range map[string][]int64{"self_attn.q_proj.weight": {128, 128}, "self_attn.k_proj.weight": {64, 128},
			"self_attn.v_proj.weight": {64, 128}, "self_attn.o_proj.weight": {128, 128}, "mlp.gate_proj.weight": {256, 128},
			"mlp.up_proj.weight": {256, 128}, "mlp.down_proj.weight": {128, 256}, "input_layernorm.weight": {128},
			"post_attention_layernorm.weight": {128}} {
			shapes[p+n] = s
		}
	}
	hdr := map[string]any{}
	var body []byte
	for n, s := range shapes {
		k := int64(1)
		for _, d := range s {
			k *= d
		}
		start := len(body)
		for i := int64(0); i < k; i++ {
			body = binary.LittleEndian.AppendUint32(body, math.Float32bits(float32(math.Sin(float64(i)))))
		}
		hdr[n] = map[string]any{"dtype": "F32", "shape": s, "data_offsets": []int{start, len(body)}}
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	b.Write(body)
	os.WriteFile(filepath.Join(dir, "model.safetensors"), b.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 128,
		"intermediate_size": 256, "num_attention_heads": 8, "num_key_value_heads": 4, "num_hidden_layers": 2,
		"vocab_size": 64, "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
		"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}`), 0o644)
	ck, err := statedict.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "llama.gguf")
	if _, err := convert.Convert(context.Background(), ck, out, convert.WithFormat(convert.GGUF),
		convert.WithGGUFType("q8_0"), convert.WithHFModelDir(dir)); err != nil {
		t.Fatal(err)
	}
	g := ollamaDecode(t, out)
	kv := g.KV()
	if kv.Architecture() != "llama" || kv.BlockCount() != 2 || kv.EmbeddingLength() != 128 || kv.ContextLength() != 512 ||
		!reflect.DeepEqual(kv.HeadCount(), []uint64{8, 8}) || !reflect.DeepEqual(kv.HeadCountKV(), []uint64{4, 4}) ||
		!reflect.DeepEqual(kv.FFNLength(), []uint64{256, 256}) || kv.Float("rope.freq_base") != 10000 ||
		kv.Float("attention.layer_norm_rms_epsilon") != float32(1e-5) || kv.Uint("rope.dimension_count") != 16 ||
		kv.FileType().String() != "Q8_0" {
		t.Errorf("ollama's view of the hyperparameters: %v", kv)
	}
	layers := g.Tensors().GroupLayers()
	for _, n := range []string{"token_embd", "output_norm", "output", "rope_freqs"} {
		if _, ok := layers[n]; !ok {
			t.Errorf("no %s", n)
		}
	}
	for l := range 2 {
		blk := layers[fmt.Sprintf("blk.%d", l)]
		for _, n := range []string{"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
			"ffn_up.weight", "ffn_down.weight", "attn_norm.weight", "ffn_norm.weight"} {
			if blk[n] == nil {
				t.Errorf("blk.%d: no %s", l, n)
			}
		}
		if k := blk["attn_k.weight"]; k != nil && (!reflect.DeepEqual(k.Shape, []uint64{128, 64}) || k.Type() != "Q8_0") {
			t.Errorf("blk.%d.attn_k.weight: %v %s", l, k.Shape, k.Type())
		}
		if n := blk["attn_norm.weight"]; n != nil && n.Type() != "F32" {
			t.Errorf("attn_norm %s", n.Type())
		}
	}
	t.Run("huggingface", func(t *testing.T) { checkJSReads(t, out, "llama") })
}
