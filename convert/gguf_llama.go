package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/internal/llamacpp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// A GGUF output of a Hugging Face model of the Llama family
// (WithHFModelDir names its directory, which holds config.json) is written
// as llama.cpp's convert_hf_to_gguf.py writes it:
//
//   - tensors renamed to llama.cpp's names (model.embed_tokens.weight ->
//     token_embd.weight, model.layers.N.self_attn.q_proj.weight ->
//     blk.N.attn_q.weight, mlp.gate_proj -> ffn_gate, input_layernorm ->
//     attn_norm, post_attention_layernorm -> ffn_norm, model.norm ->
//     output_norm, lm_head -> output, ...);
//   - for LlamaForCausalLM and MistralForCausalLM, the rows of q_proj and
//     k_proj (weights and biases) permuted from Hugging Face's rotary
//     layout back to llama.cpp's: reshape(heads, 2, head_dim/2, ...),
//     swap axes 1 and 2, reshape back, with the key/value head count for
//     k_proj. The permutation is a strided view of the source tensor, so
//     the data still streams;
//   - the hyperparameters of config.json as ARCH.* metadata
//     (context_length, embedding_length, block_count, feed_forward_length,
//     attention.head_count, attention.head_count_kv, rope.freq_base,
//     attention.layer_norm_rms_epsilon, vocab_size, and
//     rope.dimension_count for llama), general.architecture, general.name and, with
//     WithGGUFType, general.file_type;
//   - for rope_scaling llama3, the rope_freqs.weight tensor llama.cpp adds.
//
// Qwen2ForCausalLM gets the same names (and its q/k/v biases) as
// architecture qwen2, without the permutation, as llama.cpp does;
// GptOssForCausalLM gets llama.cpp's gpt-oss names, gate/up split and
// hyperparameters (gguf_gptoss.go). No
// tokenizer is written (tokenizer.ggml.model is "none", and
// Summary.GGUF.Notes says so); another
// architecture keeps its tensor names. WithGGUFMetadata's entries replace
// the ones derived here.

// WithHFModelDir names the Hugging Face model directory the input belongs
// to (where config.json is): a GGUF output of a Llama-family model there
// gets llama.cpp's tensor names, Q/K permutation and hyperparameters (see
// GGUF). Other outputs ignore it, and so does a GGUF output of a GGUF
// input.
func WithHFModelDir(dir string) Option { return func(c *options) { c.hfDir = dir } }

// GGUFReport says what a GGUF output of a Hugging Face model got.
type GGUFReport struct {
	// HFArchitecture is config.json's architectures[0] ("" without one).
	HFArchitecture string `json:"hf_architecture"`
	// Architecture is general.architecture as derived ("" when not).
	Architecture string `json:"architecture"`
	// Mapped is true when tensors got llama.cpp's names.
	Mapped bool `json:"mapped"`
	// Permuted counts the q/k tensors permuted to llama.cpp's layout.
	Permuted int `json:"permuted"`
	// Tokenizer is false: no tokenizer.ggml.* entries are written.
	Tokenizer bool `json:"tokenizer"`
	// Notes are what a user must know (no tokenizer, names kept, ...).
	Notes []string `json:"notes"`
}

// hfArch is a recognised Hugging Face architecture.
type hfArch struct {
	arch    string // general.architecture
	permute bool   // q/k rows permuted (llama.cpp's undo_permute)
	nHead   int64
	nHeadKV int64
	kvs     []gguf.KV
	extra   []ggufExtra // tensors llama.cpp's converter adds (rope_freqs.weight)
	report  GGUFReport
	table   *llamacpp.Arch // llama.cpp's names (nil when not mapped)
	// halves are the split tensors' halves read from stored MXFP4
	// blocks: 0 for the even half, 1 for the odd (gguf_gptoss.go).
	halves map[*item]int
}

// ggufExtra is a float32 tensor made from config.json, written after the
// input's tensors.
type ggufExtra struct {
	name string
	data []float32
}

// hfArchitectures maps config.json's architectures to llama.cpp's
// general.architecture and whether q/k are permuted.
var hfArchitectures = map[string]struct {
	arch    string
	permute bool
}{
	"LlamaForCausalLM":   {"llama", true},
	"MistralForCausalLM": {"llama", true},
	"Qwen2ForCausalLM":   {"qwen2", false},
	"GptOssForCausalLM":  {"gpt-oss", false},
}

// archRenames are llama.cpp's one-to-one names for an architecture's
// tensors (llamacpp.Archs) as --rename rules.
func archRenames(a *llamacpp.Arch) []Rename {
	out := make([]Rename, len(a.Names))
	for i, re := range a.Patterns() {
		out[i] = Rename{Pattern: re, Replacement: a.Names[i].To}
	}
	return out
}

// ErrHFConfig: the config.json of WithHFModelDir cannot be used (not
// JSON, too large, or a hyperparameter out of range).
var ErrHFConfig = errors.New("convert: unusable Hugging Face config.json")

// maxConfigJSON bounds the config.json read.
const maxConfigJSON = 4 << 20

// ggufPrepare, for a GGUF output, reads config.json from WithHFModelDir's
// directory and sets up the architecture's names, permutation and
// metadata. A GGUF input (names already llama.cpp's) is left alone.
func (c *config) ggufPrepare(ck *statedict.Checkpoint) error {
	if c.hfDir == "" || ck.GGUF != nil || c.ggufKeep != nil {
		return nil
	}
	p := filepath.Join(c.hfDir, "config.json")
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigJSON+1))
	if err != nil {
		return err
	}
	if len(b) > maxConfigJSON {
		return fmt.Errorf("%w: %s: larger than %d bytes", ErrHFConfig, p, maxConfigJSON)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrHFConfig, p, err)
	}
	a, err := hfArchFromConfig(cfg, filepath.Base(filepath.Clean(c.hfDir)), c.ggufType)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrHFConfig, p, err)
	}
	if !a.report.Mapped {
		c.ggufArch = a
		return nil
	}
	c.renames = append(c.renames, archRenames(a.table)...)
	var unmapped []string
	for _, t := range ck.Tensors {
		if !c.selected(t.Name) {
			continue
		}
		name := c.newName(t.Name)
		if _, _, split := a.table.SplitOf(name); !split && !strings.HasPrefix(name, "blk.") && !slices.Contains(llamacpp.Top, name) {
			unmapped = append(unmapped, name)
		}
	}
	if len(unmapped) > 0 {
		a.report.Notes = append(a.report.Notes, fmt.Sprintf("%d tensors have no llama.cpp name and keep their own (%s%s)",
			len(unmapped), unmapped[0], map[bool]string{true: ", ...", false: ""}[len(unmapped) > 1]))
	}
	if tok := filepath.Join(c.hfDir, "tokenizer.json"); fileExists(tok) || fileExists(filepath.Join(c.hfDir, "tokenizer.model")) {
		a.report.Notes = append(a.report.Notes, "no tokenizer written (tokenizer.json/tokenizer.model not converted; tokenizer.ggml.model = none): llama.cpp loads the model and runs token ids but cannot read text, and ollama cannot run it, until tokenizer.ggml.* entries are added, e.g. --gguf-meta-file with the tokenizer entries of `ckpt inspect --json` of a GGUF of the same model")
	} else {
		a.report.Notes = append(a.report.Notes, "no tokenizer written (none in the model directory; tokenizer.ggml.model = none): llama.cpp loads the model and runs token ids but cannot read text, and ollama cannot run it, until tokenizer.ggml.* entries are added (--gguf-meta-file)")
	}
	c.ggufArch = a
	return nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// hfArchFromConfig derives the architecture, its metadata and notes from
// config.json's fields.
func hfArchFromConfig(cfg map[string]any, name, ggufType string) (*hfArch, error) {
	a := &hfArch{}
	list, _ := cfg["architectures"].([]any)
	var known struct {
		arch    string
		permute bool
	}
	ok := false
	for _, x := range list {
		s, _ := x.(string)
		if a.report.HFArchitecture == "" {
			a.report.HFArchitecture = s
		}
		if known, ok = hfArchitectures[s]; ok {
			a.report.HFArchitecture = s
			break
		}
	}
	if !ok {
		a.report.Notes = append(a.report.Notes, fmt.Sprintf("architecture %q has no llama.cpp mapping here: tensors keep their names, general.architecture comes from --gguf-meta", a.report.HFArchitecture))
		return a, nil
	}
	a.arch, a.permute = known.arch, known.permute
	a.table = llamacpp.Archs[a.arch]
	a.report.Architecture, a.report.Mapped = a.arch, true
	var found string // the config key num found last, for errors
	num := func(keys ...string) (float64, bool) {
		for _, k := range keys {
			if v, ok := cfg[k].(float64); ok {
				found = k
				return v, true
			}
		}
		return 0, false
	}
	u32 := func(key string, v float64) (gguf.KV, error) {
		if v < 0 || v > math.MaxUint32 || v != math.Trunc(v) {
			return gguf.KV{}, fmt.Errorf("%s (for %s.%s): %v is not a uint32", found, a.arch, key, v)
		}
		return gguf.KV{Key: a.arch + "." + key, Type: gguf.TypeUint32, Value: uint32(v)}, nil
	}
	add := func(key string, keys ...string) error {
		v, ok := num(keys...)
		if !ok {
			return nil
		}
		kv, err := u32(key, v)
		if err == nil {
			a.kvs = append(a.kvs, kv)
		}
		return err
	}
	a.kvs = append(a.kvs, gguf.KV{Key: "general.architecture", Type: gguf.TypeString, Value: a.arch},
		gguf.KV{Key: "general.name", Type: gguf.TypeString, Value: name})
	for _, e := range []struct {
		key  string
		keys []string
	}{
		{"context_length", []string{"max_position_embeddings", "n_ctx"}},
		{"embedding_length", []string{"hidden_size", "n_embd"}},
		{"block_count", []string{"num_hidden_layers", "n_layers", "n_layer"}},
		{"feed_forward_length", []string{"intermediate_size", "n_inner"}},
		{"attention.head_count", []string{"num_attention_heads", "n_head"}},
		{"attention.head_count_kv", []string{"num_key_value_heads"}},
	} {
		if err := add(e.key, e.keys...); err != nil {
			return nil, err
		}
	}
	theta, ok := num("rope_theta")
	if rp, isMap := cfg["rope_parameters"].(map[string]any); !ok && isMap {
		theta, ok = rp["rope_theta"].(float64)
	}
	if ok {
		a.kvs = append(a.kvs, gguf.KV{Key: a.arch + ".rope.freq_base", Type: gguf.TypeFloat32, Value: float32(theta)})
	}
	if eps, ok := num("rms_norm_eps"); ok {
		a.kvs = append(a.kvs, gguf.KV{Key: a.arch + ".attention.layer_norm_rms_epsilon", Type: gguf.TypeFloat32, Value: float32(eps)})
	}
	heads, hasHeads := num("num_attention_heads", "n_head")
	hidden, hasHidden := num("hidden_size", "n_embd")
	count := func(v float64) int64 { // a head count, or 0 when it is not one
		if v != math.Trunc(v) || v < 1 || v > 1<<24 {
			return 0
		}
		return int64(v)
	}
	a.nHead = count(heads)
	a.nHeadKV = a.nHead
	if kv, ok := num("num_key_value_heads"); ok {
		a.nHeadKV = count(kv)
	}
	// vocab_size: llama.cpp's converter writes it for llama only (others
	// count the tokenizer's tokens); without a tokenizer it is where
	// llama.cpp finds the vocabulary size, so it is written for every
	// architecture.
	if v, ok := num("vocab_size"); ok {
		kv, err := u32("vocab_size", v)
		if err != nil {
			return nil, err
		}
		a.kvs = append(a.kvs, kv)
	}
	if a.arch == "llama" {
		dim, ok := num("head_dim")
		if !ok && hasHeads && hasHidden && heads > 0 {
			dim, ok, found = math.Floor(hidden/heads), true, "hidden_size/num_attention_heads"
		}
		if ok {
			kv, err := u32("rope.dimension_count", dim)
			if err != nil {
				return nil, err
			}
			a.kvs = append(a.kvs, kv)
		}
	}
	if a.permute && (a.nHead <= 0 || a.nHeadKV <= 0) {
		return nil, fmt.Errorf("num_attention_heads/num_key_value_heads missing or not an integer from 1 to %d: the q/k permutation needs them", 1<<24)
	}
	rs, _ := cfg["rope_scaling"].(map[string]any)
	if rs == nil {
		rs, _ = cfg["rope_parameters"].(map[string]any)
	}
	if rs != nil {
		typ, _ := rs["rope_type"].(string)
		if typ == "" {
			typ, _ = rs["type"].(string)
		}
		factor, hasFactor := rs["factor"].(float64)
		switch {
		case typ == "linear" && hasFactor:
			a.kvs = append(a.kvs, gguf.KV{Key: a.arch + ".rope.scaling.type", Type: gguf.TypeString, Value: "linear"},
				gguf.KV{Key: a.arch + ".rope.scaling.factor", Type: gguf.TypeFloat32, Value: float32(factor)})
		case strings.EqualFold(typ, "llama3") && a.arch == "llama":
			base := 10000.0
			if theta, ok := num("rope_theta"); ok {
				base = theta
			} else if theta, ok := rs["rope_theta"].(float64); ok {
				base = theta
			}
			dim, ok := num("head_dim")
			if !ok && hasHeads && hasHidden && heads > 0 {
				dim = math.Floor(hidden / heads)
			}
			get := func(m map[string]any, k string, def float64) float64 {
				if v, ok := m[k].(float64); ok {
					return v
				}
				return def
			}
			if dim < 2 || dim > 1<<16 || dim != math.Trunc(dim) {
				return nil, fmt.Errorf("head dimension %v: llama3 rope factors need an even size up to 65536", dim)
			}
			a.extra = append(a.extra, ggufExtra{"rope_freqs.weight", llama3RopeFactors(base, int(dim), get(rs, "factor", 8),
				get(rs, "low_freq_factor", 1), get(rs, "high_freq_factor", 4),
				get(rs, "original_max_position_embeddings", get(cfg, "original_max_position_embeddings", 8192)))})
			a.report.Notes = append(a.report.Notes, "rope_freqs.weight added for rope_scaling llama3, as llama.cpp's converter adds it")
		case typ == "yarn" && a.arch == "gpt-oss":
			kvs, err := yarnKVs(a.arch, rs)
			if err != nil {
				return nil, err
			}
			a.kvs = append(a.kvs, kvs...)
		case typ == "" || typ == "default":
		default:
			a.report.Notes = append(a.report.Notes, fmt.Sprintf("rope_scaling %q not converted (llama.cpp writes more entries for it): long-context behaviour differs", typ))
		}
	}
	if a.arch == "gpt-oss" {
		kvs, err := gptOssKVs(cfg)
		if err != nil {
			return nil, err
		}
		a.kvs = append(a.kvs, kvs...)
	}
	// No vocabulary: llama.cpp's own word for it, with which llama.cpp
	// loads the model (vocab_size dummy tokens) and runs token ids.
	a.kvs = append(a.kvs, gguf.KV{Key: "tokenizer.ggml.model", Type: gguf.TypeString, Value: "none"})
	if ft, ok := ggufFileTypes[ggufType]; ok {
		a.kvs = append(a.kvs, gguf.KV{Key: "general.file_type", Type: gguf.TypeUint32, Value: ft})
	}
	return a, nil
}

// llama3RopeFactors computes the rope_freqs.weight tensor llama.cpp's
// converter adds for rope_type llama3: per frequency pair, 1 for short
// wavelengths, factor for long ones and a smooth blend between, with
// torch's float32 operations in llama.cpp's order (freqs = 1 /
// base**(arange(0, dim, 2)/dim); wavelen = 2*pi/freq; smooth = (ctx /
// wavelen - low) / (high - low); 1 / ((1 - smooth)/factor + smooth)).
// The context length is rope_scaling's original_max_position_embeddings
// as transformers reads it (llama.cpp's converter reads the top-level key,
// 8192 without it: the same for Llama 3.1 to 3.3, whose two agree), then
// the top-level one, then 8192.
func llama3RopeFactors(base float64, dim int, factor, low, high, ctx float64) []float32 {
	lowWave, highWave := ctx/low, ctx/high
	out := make([]float32, 0, dim/2)
	for i := 0; i < dim; i += 2 {
		e := float32(i) / float32(dim)
		p := float32(math.Pow(float64(float32(base)), float64(e)))
		freq := 1 / p
		wavelen := (1 / freq) * float32(2*math.Pi) // torch: scalar / t is t.reciprocal() * scalar
		switch {
		case float64(wavelen) < highWave:
			out = append(out, 1)
		case float64(wavelen) > lowWave:
			out = append(out, float32(factor))
		default:
			smooth := ((1/wavelen)*float32(ctx) - float32(low)) / float32(high-low)
			out = append(out, 1/((1-smooth)/float32(factor)+smooth))
		}
	}
	return out
}

// ggufFileTypes are llama.cpp's llama_ftype numbers for --gguf-type (the
// K-quants as their "S" variants: every weight of the one type).
var ggufFileTypes = map[string]uint32{"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9,
	"q4_k": 14, "q5_k": 16, "q6_k": 18, "bf16": 32, "mxfp4": 38}

// ggufPermuted returns the tensor to read for an item: for a permuted
// architecture's attn_q/attn_k, a strided view of the source whose
// elements, in C order, are the rows in llama.cpp's order.
func (c *config) ggufPermuted(it *item) (*statedict.Tensor, error) {
	a := c.ggufArch
	if a == nil || !a.permute {
		return it.src, nil
	}
	m := llamacpp.QK().FindStringSubmatch(it.name)
	if m == nil {
		return it.src, nil
	}
	heads := a.nHead
	if m[1] == "k" {
		heads = a.nHeadKV
	}
	v, err := permuteView(it.src, heads)
	if err != nil {
		return nil, &TensorError{Name: it.name, Err: err}
	}
	return v, nil
}

// permuteView returns t's rows reordered as llama.cpp's permute does
// (llamacpp.Permute), as a view over t's storage.
func permuteView(t *statedict.Tensor, heads int64) (*statedict.Tensor, error) {
	shape, strides, err := llamacpp.Permute(t.Shape, t.Strides, heads)
	if err != nil {
		return nil, err
	}
	v := *t
	v.Shape, v.Strides = shape, strides
	return &v, nil
}

// summary returns what Summary.GGUF says (nil without a model
// directory); the writer fills in Permuted.
func (a *hfArch) summary() *GGUFReport {
	if a == nil {
		return nil
	}
	if a.report.Notes == nil {
		a.report.Notes = []string{}
	}
	return &a.report
}
