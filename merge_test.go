package ckpt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// writeST writes float32 tensors as a safetensors file.
func writeST(t *testing.T, path string, tensors map[string][]int64) {
	t.Helper()
	names := make([]string, 0, len(tensors))
	for n := range tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	hdr := map[string]any{}
	var data []byte
	for i, n := range names {
		el := int64(1)
		for _, d := range tensors[n] {
			el *= d
		}
		start := len(data)
		for j := int64(0); j < el; j++ {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i+1)*0.25+float32(j)*0.01))
		}
		hdr[n] = map[string]any{"dtype": "F32", "shape": tensors[n], "data_offsets": []int{start, len(data)}}
	}
	h, _ := json.Marshal(hdr)
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	if err := os.WriteFile(path, append(append(b, h...), data...), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeAdapter(t *testing.T, dir, cfg string, tensors map[string][]int64) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	writeST(t, filepath.Join(dir, "adapter_model.safetensors"), tensors)
	return dir
}

// TestMergeRefusals: each mismatch is refused with its sentinel error
// before anything is written, and no output is left.
func TestMergeRefusals(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.safetensors")
	writeST(t, base, map[string][]int64{"l.q.weight": {4, 3}, "l.q.bias": {4}, "emb.weight": {10, 4}})
	const cfg = `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["q"]}`
	good := map[string][]int64{"base_model.model.l.q.lora_A.weight": {2, 3}, "base_model.model.l.q.lora_B.weight": {4, 2}}
	for _, c := range []struct {
		name    string
		cfg     string
		tensors map[string][]int64
		want    error
	}{
		{"module the base lacks", cfg, map[string][]int64{"base_model.model.m.q.lora_A.weight": {2, 3}, "base_model.model.m.q.lora_B.weight": {4, 2}}, ErrAdapterMismatch},
		{"not a target", `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["k"]}`, good, ErrAdapterMismatch},
		{"rank not the config's", `{"peft_type": "LORA", "r": 4, "lora_alpha": 4, "target_modules": ["q"]}`, good, ErrAdapterShape},
		{"B rows", cfg, map[string][]int64{"base_model.model.l.q.lora_A.weight": {2, 3}, "base_model.model.l.q.lora_B.weight": {5, 2}}, ErrAdapterShape},
		{"half a pair", cfg, map[string][]int64{"base_model.model.l.q.lora_A.weight": {2, 3}}, ErrAdapterMismatch},
		{"IA3", `{"peft_type": "IA3", "target_modules": ["q"]}`, good, ErrAdapterNotLoRA},
		{"unknown key set", `{"peft_type": "LORA", "r": 2, "target_modules": ["q"], "use_magic": true}`, good, ErrAdapterUnsupported},
		{"replacement of another shape", cfg, map[string][]int64{"base_model.model.emb.weight": {11, 4}}, ErrAdapterShape},
		{"DoRA without magnitude", `{"peft_type": "LORA", "r": 2, "target_modules": ["q"], "use_dora": true}`, good, ErrAdapterMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			ad := writeAdapter(t, filepath.Join(dir, c.name), c.cfg, c.tensors)
			out := filepath.Join(dir, "merged.safetensors")
			_, err := Merge(context.Background(), base, out, []MergeAdapter{{ad, 1}})
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if _, serr := os.Stat(out); !os.IsNotExist(serr) {
				t.Errorf("output left behind: %v", serr)
			}
		})
	}
	// The same base with the good adapter merges; two adapters replacing
	// one tensor, and a DoRA adapter with another, are refused.
	ad := writeAdapter(t, filepath.Join(dir, "good"), cfg, good)
	if _, err := Merge(context.Background(), base, filepath.Join(dir, "ok.safetensors"), []MergeAdapter{{ad, 1}}); err != nil {
		t.Fatal(err)
	}
	r1 := writeAdapter(t, filepath.Join(dir, "r1"), cfg, map[string][]int64{"base_model.model.emb.weight": {10, 4}})
	r2 := writeAdapter(t, filepath.Join(dir, "r2"), cfg, map[string][]int64{"base_model.model.emb.weight": {10, 4}})
	if _, err := Merge(context.Background(), base, filepath.Join(dir, "no.safetensors"), []MergeAdapter{{r1, 1}, {r2, 1}}); !errors.Is(err, ErrAdapterUnsupported) {
		t.Errorf("two replacements: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no.safetensors")); !os.IsNotExist(err) {
		t.Errorf("output left behind: %v", err)
	}
}

func TestParseMergeAdapter(t *testing.T) {
	for in, want := range map[string]MergeAdapter{
		"lora":                {"lora", 1},
		"lora:0.7":            {"lora", 0.7},
		"a/b:-0.35":           {"a/b", -0.35},
		"s3://bucket/lora/":   {"s3://bucket/lora/", 1},
		"s3://bucket/lora:-2": {"s3://bucket/lora", -2},
	} {
		got, err := ParseMergeAdapter(in)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v", in, got, err)
		}
	}
	if _, err := ParseMergeAdapter(""); !errors.Is(err, ErrMergeOption) {
		t.Errorf("empty: %v", err)
	}
}
