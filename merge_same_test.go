package ckpt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// storedBytes returns every tensor of the checkpoint at p as stored (codes
// and scales apart), by name.
func storedBytes(t *testing.T, p string) map[string][]byte {
	t.Helper()
	ck, err := statedict.Open(p, statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := map[string][]byte{}
	for _, x := range ck.Tensors {
		b, err := x.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		out[x.Name] = b
	}
	return out
}

func quantizationConfig(t *testing.T, dir string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, "config.json")), &m); err != nil {
		t.Fatal(err)
	}
	return m["quantization_config"]
}

// sameBase writes a small dense float32 model and its fp8-block:8x8
// quantization (down_proj, of 20 columns, stays dense), and a LoRA
// adapter on q_proj and v_proj. It returns the quantized base's directory
// and the adapter.
func sameBase(t *testing.T, dir string) (dense, qdir, adapter string) {
	t.Helper()
	p := "model.layers.0."
	dense = filepath.Join(dir, "dense.safetensors")
	writeST(t, dense, map[string][]int64{
		"model.embed_tokens.weight": {32, 16}, p + "self_attn.q_proj.weight": {16, 16}, p + "self_attn.k_proj.weight": {16, 16},
		p + "self_attn.v_proj.weight": {24, 16}, p + "mlp.up_proj.weight": {24, 16}, p + "mlp.down_proj.weight": {16, 20}, "model.norm.weight": {16}, "lm_head.weight": {32, 16},
	})
	spec, err := ParseQuantize("fp8-block:8x8")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := Open(context.Background(), dense)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	qdir = filepath.Join(dir, "fp8") + "/"
	if _, err := Convert(context.Background(), ck, qdir, ConvertWithQuantize(spec)); err != nil {
		t.Fatal(err)
	}
	pre := "base_model.model." + p + "self_attn."
	adapter = writeAdapter(t, filepath.Join(dir, "lora"), `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q_proj", "v_proj"]}`,
		map[string][]int64{pre + "q_proj.lora_A.weight": {2, 16}, pre + "q_proj.lora_B.weight": {16, 2},
			pre + "v_proj.lora_A.weight": {2, 16}, pre + "v_proj.lora_B.weight": {24, 2}})
	return dense, qdir, adapter
}

// TestMergeQuantizeSame: merged into a block-FP8 base with
// MergeWithQuantizeSame, the weights no adapter touches are the base's
// stored bytes (codes and scales; requantizing their dequantized values,
// as --quantize fp8-block:8x8 does, gives other bytes), the merged ones
// are byte for byte what --quantize fp8-block:8x8 makes of the merged
// values (and not the base's), the dense tensors are the base's, the
// config.json's quantization_config is the base's, and the output reads
// back as block FP8 with 8x8 blocks.
func TestMergeQuantizeSame(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	_, qdir, adapter := sameBase(t, dir)
	ads := []MergeAdapter{{adapter, 1}}
	same := filepath.Join(dir, "same") + "/"
	rep, err := Merge(ctx, qdir, same, ads, MergeWithQuantizeSame())
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := ParseQuantize("fp8-block:8x8")
	explicit := filepath.Join(dir, "explicit") + "/"
	if _, err := Merge(ctx, qdir, explicit, ads, MergeWithConvertOptions(ConvertWithQuantize(spec))); err != nil {
		t.Fatal(err)
	}
	q := rep.Output.Quantize
	if q == nil || q.Scheme != "fp8-block:8x8" || q.Quantized != 4 || q.Copied != 2 || rep.Merged != 2 {
		t.Fatalf("report %+v, %d merged", q, rep.Merged)
	}
	base, got, want := storedBytes(t, qdir), storedBytes(t, same), storedBytes(t, explicit)
	names := func(m map[string][]byte) []string {
		var s []string
		for n := range m {
			s = append(s, n)
		}
		sort.Strings(s)
		return s
	}
	if !reflect.DeepEqual(names(got), names(base)) {
		t.Fatalf("tensors %v, the base has %v", names(got), names(base))
	}
	requantized := 0
	for n, b := range base {
		merged := strings.Contains(n, "q_proj") || strings.Contains(n, "v_proj")
		switch {
		case merged && !bytes.Equal(got[n], want[n]):
			t.Errorf("%s: merged, not what --quantize fp8-block:8x8 writes for the merged values", n)
		case merged && bytes.Equal(got[n], b):
			t.Errorf("%s: merged, still the base's bytes: the delta is missing", n)
		case !merged && !bytes.Equal(got[n], b):
			t.Errorf("%s: no adapter touches it, its bytes differ from the base's", n)
		case !merged && strings.Contains(n, "proj") && !bytes.Equal(want[n], b):
			requantized++
		}
	}
	if requantized == 0 {
		t.Error("requantizing the untouched weights gave the base's bytes: the test does not tell a copy from a requantization")
	}
	if g, w := quantizationConfig(t, same), quantizationConfig(t, qdir); !reflect.DeepEqual(g, w) || w == nil {
		t.Errorf("quantization_config %v, the base's %v", g, w)
	}
	ck, err := Open(ctx, same)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Quantization == nil || len(ck.Quantization.Schemes) != 1 || ck.Quantization.Schemes[0].Scheme != "fp8 e4m3, 8x8 blocks, scales in weight_scale_inv" ||
		ck.Quantization.Schemes[0].Tensors != 4 {
		t.Errorf("read back: %+v", ck.Quantization)
	}
}

// TestMergeQuantizeSameDense: a dense base merges as without the option;
// the option with a named scheme is refused.
func TestMergeQuantizeSameDense(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dense, qdir, adapter := sameBase(t, dir)
	ads := []MergeAdapter{{adapter, 1}}
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	rep, err := Merge(ctx, dense, a, ads, MergeWithQuantizeSame())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(ctx, dense, b, ads); err != nil {
		t.Fatal(err)
	}
	if rep.Output.Quantize != nil || !bytes.Equal(readFile(t, a), readFile(t, b)) {
		t.Errorf("dense base: quantize report %+v, or other bytes than a plain merge", rep.Output.Quantize)
	}
	spec, _ := ParseQuantize("fp8-block")
	out := filepath.Join(dir, "c") + "/"
	_, err = Merge(ctx, qdir, out, ads, MergeWithQuantizeSame(), MergeWithConvertOptions(ConvertWithQuantize(spec)))
	if !errors.Is(err, ErrConvertOption) {
		t.Errorf("same and a scheme: %v", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Errorf("output left: %v", serr)
	}
}
