package ckpt

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// refPy runs lora/testdata/peft_ref.py in dir (copied there: the torch
// 2.x chroot sees /tmp, not every checkout).
func refPy(t *testing.T, dir string, args ...string) string {
	t.Helper()
	src, err := os.ReadFile("lora/testdata/peft_ref.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "peft_ref.py"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(testenv.Python(), append([]string{"peft_ref.py"}, args...)...)
	cmd.Dir, cmd.Stderr = dir, &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peft_ref.py %v: %v\n%s%s", args, err, out, stderr.String())
	}
	return string(out)
}

// readFloats returns every tensor of a checkpoint as float32 values, and
// its raw bytes.
func readFloats(t *testing.T, path string) (map[string][]float32, map[string][]byte) {
	t.Helper()
	ck, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	vals, raw := map[string][]float32{}, map[string][]byte{}
	for _, tn := range ck.Tensors {
		b, err := tn.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, tn.NumEl())
		dtype.DecodeFloat32(tn.DType, v, b)
		vals[tn.Name], raw[tn.Name] = v, b
	}
	return vals, raw
}

// TestInteropMergePEFT: ckpt merge against PEFT's merge followed in torch
// (lora/testdata/peft_ref.py, PEFT's source cited there) on a small model
// with Linear, Conv1D (fan_in_fan_out) and Embedding modules, for plain
// LoRA, rsLoRA, rank/alpha patterns with a regex target_modules,
// fan_in_fan_out, DoRA, embedding LoRA, modules_to_save with a trained
// bias, lora_bias, and two weighted adapters (one an adapter_model.bin).
// Every merged float32 element is within (r+4) float32 epsilons of the
// sum of the magnitudes of its terms (|W| + |s| * |B| @ |A|, summed over
// adapters; for DoRA also times the factor, plus |W'|): the two differ
// only in summation order and where the scaling rounds. Tensors no
// adapter touches have the base's bytes. The merged model's forward pass
// in torch matches the base's with the adapters applied unmerged.
func TestInteropMergePEFT(t *testing.T) {
	testenv.Require(t, "torch", "safetensors.torch") // not the Go package safetensors/ in the working directory
	dir := t.TempDir()
	refPy(t, dir, "make", dir)
	base := filepath.Join(dir, "model.safetensors")
	_, baseRaw := readFloats(t, base)
	adapters := map[string][]MergeAdapter{"two": {{filepath.Join(dir, "two", "a0"), 0.7}, {filepath.Join(dir, "two", "a1"), -0.35}}}
	for _, c := range []string{"plain", "rslora", "patterns", "fifo", "dora", "embed", "save", "lorabias"} {
		adapters[c] = []MergeAdapter{{filepath.Join(dir, c, "a0"), 1}}
	}
	const eps = 1.0 / (1 << 23)
	for c, ads := range adapters {
		t.Run(c, func(t *testing.T) {
			out := filepath.Join(dir, c, "out.safetensors")
			rep, err := Merge(context.Background(), base, out, ads)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := readFloats(t, filepath.Join(dir, c, "expected.safetensors"))
			bound, _ := readFloats(t, filepath.Join(dir, c, "bound.safetensors"))
			got, gotRaw := readFloats(t, out)
			if rep.Merged+rep.Replaced != len(want) {
				t.Errorf("report: %d merged + %d replaced, the reference changed %d tensors", rep.Merged, rep.Replaced, len(want))
			}
			maxR := 0
			for _, a := range rep.Modules {
				maxR = max(maxR, a.Rank)
			}
			if len(ads) > 1 {
				maxR *= len(ads)
			}
			worst := 0.0
			for name, raw := range baseRaw {
				w, changed := want[name]
				if !changed {
					if !bytes.Equal(gotRaw[name], raw) {
						t.Errorf("%s: untouched by the adapter, but its bytes changed", name)
					}
					continue
				}
				g := got[name]
				for i := range w {
					d := math.Abs(float64(g[i]) - float64(w[i]))
					lim := float64(maxR+4) * eps * float64(bound[name][i])
					if d > lim || math.IsNaN(float64(g[i])) {
						t.Fatalf("%s[%d]: ckpt %v, PEFT %v: off by %g, bound %g", name, i, g[i], w[i], d, lim)
					}
					if lim > 0 {
						worst = max(worst, d/(eps*float64(bound[name][i])))
					}
				}
			}
			t.Logf("worst difference: %.2f float32 epsilons of the terms' magnitude (bound %d)", worst, maxR+4)
			t.Log(refPy(t, dir, "forward", dir, c, out))
			if c == "plain" { // the same merge through the .pth output
				pt := filepath.Join(dir, c, "out.pt")
				if _, err := Merge(context.Background(), base, pt, ads); err != nil {
					t.Fatal(err)
				}
				_, ptRaw := readFloats(t, pt)
				for name, b := range gotRaw {
					if !bytes.Equal(ptRaw[name], b) {
						t.Errorf("%s: the .pth output differs from the safetensors output", name)
					}
				}
			}
			if testing.Verbose() {
				b, _ := json.Marshal(rep.Modules)
				t.Logf("modules: %s", b)
			}
		})
	}
}
