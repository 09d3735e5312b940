package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTinyHF writes a one-layer Hugging Face Llama directory
// (model.safetensors, config.json and a tokenizer.json).
func writeTinyHF(t *testing.T, dir string) {
	t.Helper()
	shapes := map[string][]int64{
		"model.embed_tokens.weight":                      {8, 32},
		"model.layers.0.self_attn.q_proj.weight":         {32, 32},
		"model.layers.0.self_attn.k_proj.weight":         {16, 32},
		"model.layers.0.post_attention_layernorm.weight": {32},
		"model.norm.weight":                              {32},
	}
	hdr := map[string]any{}
	var body []byte
	seed := int64(1)
	for _, n := range sortedKeys(shapes) {
		k := int64(1)
		for _, s := range shapes[n] {
			k *= s
		}
		start := len(body)
		body = append(body, f32bytes(randFloats(int(k), seed))...)
		seed++
		hdr[n] = map[string]any{"dtype": "F32", "shape": shapes[n], "data_offsets": []int{start, len(body)}}
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	b.Write(body)
	for name, data := range map[string][]byte{
		"model.safetensors": b.Bytes(),
		"config.json": []byte(`{"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "intermediate_size": 64,
			"num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 8,
			"max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0}`),
		"tokenizer.json": []byte(`{}`),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConvertGGUFLlama: `ckpt convert` of a Hugging Face Llama directory,
// or of its model.safetensors, to GGUF picks up config.json: llama.cpp's
// names and keys, and a note that no tokenizer was written, in the text
// and --json summaries.
func TestConvertGGUFLlama(t *testing.T) {
	dir := t.TempDir()
	writeTinyHF(t, dir)
	out := filepath.Join(t.TempDir(), "a.gguf")
	code, stdout, errs := runCLI(t, "convert", dir, out)
	if code != exitOK {
		t.Fatalf("exit %d %s %s", code, stdout, errs)
	}
	if !strings.Contains(stdout, "LlamaForCausalLM mapped to llama.cpp's llama names") || !strings.Contains(stdout, "2 q/k tensors permuted") ||
		!strings.Contains(stdout, "gguf: note: no tokenizer written (tokenizer.json") {
		t.Errorf("summary:\n%s", stdout)
	}
	f, _ := parseGGUF(t, out)
	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	got := " " + strings.Join(names, " ") + " "
	for _, want := range []string{"token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.ffn_norm.weight", "output_norm.weight"} {
		if !strings.Contains(got, " "+want+" ") {
			t.Errorf("no %s in%s", want, got)
		}
	}
	if kv, ok := f.Get("llama.attention.head_count_kv"); !ok || kv.Value != uint32(2) {
		t.Errorf("head_count_kv %v", kv.Value)
	}

	out2 := filepath.Join(t.TempDir(), "b.gguf")
	code, stdout, errs = runCLI(t, "convert", filepath.Join(dir, "model.safetensors"), out2, "--gguf-type", "q8_0", "--json")
	if code != exitOK {
		t.Fatalf("exit %d %s %s", code, stdout, errs)
	}
	var rep struct {
		GGUF struct {
			Architecture string   `json:"architecture"`
			Permuted     int      `json:"permuted"`
			Notes        []string `json:"notes"`
		} `json:"gguf"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.GGUF.Architecture != "llama" || rep.GGUF.Permuted != 2 || len(rep.GGUF.Notes) != 1 {
		t.Errorf("--json gguf %+v (%v)\n%s", rep.GGUF, err, stdout)
	}

	// --gguf-hf-dir none keeps the names; a directory without config.json
	// is a usage error.
	out3 := filepath.Join(t.TempDir(), "c.gguf")
	code, stdout, errs = runCLI(t, "convert", dir, out3, "--gguf-hf-dir", "none", "--gguf-meta", "general.architecture=llama")
	if code != exitOK || strings.Contains(stdout, "gguf:") {
		t.Fatalf("--gguf-hf-dir none: exit %d %s %s", code, stdout, errs)
	}
	if f, _ := parseGGUF(t, out3); f.Tensors[0].Name == "token_embd.weight" || !strings.HasPrefix(f.Tensors[0].Name, "model.") {
		t.Errorf("--gguf-hf-dir none renamed %s", f.Tensors[0].Name)
	}
	if code, _, errs := runCLI(t, "convert", dir, filepath.Join(t.TempDir(), "d.gguf"), "--gguf-hf-dir", t.TempDir()); code != exitUsage || !strings.Contains(errs, "config.json") {
		t.Errorf("--gguf-hf-dir without config.json: exit %d %q", code, errs)
	}
}
