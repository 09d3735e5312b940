package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeCLI: a merge prints its --json report (tensors merged, the
// scale of each module); a refused adapter is one line on stderr, exit 1,
// and no output; a merge without an adapter is a usage error.
func TestMergeCLI(t *testing.T) {
	// l.weight (2, 2) of ones; lora_A (1, 2) and lora_B (2, 1) of ones.
	one := "\x00\x00\x80\x3f"
	base := writeSafetensors(t, `{"l.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`, []byte(strings.Repeat(one, 4)))
	ad := t.TempDir()
	st := writeSafetensors(t, `{"base_model.model.l.lora_A.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},`+
		`"base_model.model.l.lora_B.weight":{"dtype":"F32","shape":[2,1],"data_offsets":[8,16]}}`, []byte(strings.Repeat(one, 4)))
	if err := os.Rename(st, filepath.Join(ad, "adapter_model.safetensors")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(ad, "adapter_config.json")
	os.WriteFile(cfg, []byte(`{"peft_type": "LORA", "r": 1, "lora_alpha": 4, "use_rslora": true, "target_modules": ["l"]}`), 0o644)
	out := filepath.Join(t.TempDir(), "m.safetensors")
	stdout, code, stderr := cli("merge", "--json", base, "--adapter", ad+":0.5", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Merged  int `json:"tensors_merged"`
		Modules []struct {
			Tensor string
			Scale  float64
			Weight float64
		}
		Output struct{ Files []string }
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err, stdout)
	}
	if rep.Merged != 1 || len(rep.Modules) != 1 || rep.Modules[0].Scale != 4 || rep.Modules[0].Weight != 0.5 || rep.Output.Files[0] != out {
		t.Errorf("report %+v", rep)
	}
	// 1 + 0.5 * (4 / sqrt(1)) * 1 = 3 in every element.
	if b, err := os.ReadFile(out); err != nil || !strings.HasSuffix(string(b), strings.Repeat("\x00\x00\x40\x40", 4)) {
		t.Errorf("merged values: %v %x", err, b[len(b)-16:])
	}

	os.WriteFile(cfg, []byte(`{"peft_type": "LOHA", "r": 1}`), 0o644)
	out2 := filepath.Join(t.TempDir(), "m.safetensors")
	_, code, stderr = cli("merge", base, ad, out2)
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "not a LoRA adapter") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("output left: %v", err)
	}
	if _, code, _ = cli("merge", base, out2); code != 2 {
		t.Errorf("no adapter: exit %d, want 2", code)
	}
}
