package statedict_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// quantRelease writes a quantized release with quant/testdata/quantize.py
// in torch 2.6 (the tools' own layout and the upstream dequantization as
// the expected values) and returns its directory. It runs the script from
// a temporary directory, which the torch 2.x chroot sees.
func quantRelease(t *testing.T, args ...string) string {
	t.Helper()
	script, err := os.ReadFile("../quant/testdata/quantize.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(testenv.Python(), append([]string{"-c", string(script), args[0], dir}, args[1:]...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := fmt.Sprintf("%s cannot write the fixture (needs torch >= 2.1 with float8 and safetensors): %v\n%s", testenv.Python(), err, out)
		if os.Getenv("CKPT_REQUIRE_INTEROP") == "all" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// checkQuantValues opens dir/release and compares every tensor's data
// with expected.safetensors' NAME.out (what upstream gives in the
// model's dtype), bit for bit.
func checkQuantValues(t *testing.T, dir string, opts ...statedict.Option) *statedict.Checkpoint {
	t.Helper()
	ck, err := statedict.Open(filepath.Join(dir, "release"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	exp, err := statedict.Open(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	n := 0
	for _, et := range exp.Tensors {
		name, ok := strings.CutSuffix(et.Name, ".out")
		if !ok {
			continue
		}
		n++
		got := ck.Tensor(name)
		if got == nil {
			t.Errorf("%s: missing", name)
			continue
		}
		if got.DType != et.DType || fmt.Sprint(got.Shape) != fmt.Sprint(et.Shape) {
			t.Errorf("%s: %s %v, want %s %v", name, got.DType, got.Shape, et.DType, et.Shape)
			continue
		}
		gb, err := got.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		eb, err := et.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gb, eb) {
			i := 0
			for i < len(gb) && gb[i] == eb[i] {
				i++
			}
			t.Errorf("%s: differs from upstream first at byte %d of %d", name, i, len(eb))
		}
	}
	if n == 0 || len(ck.Tensors) != n {
		t.Errorf("%d tensors, %d expected", len(ck.Tensors), n)
	}
	return ck
}

// TestQuantFP8BlockUpstream: DeepSeek-layout block FP8 (ragged 300x200 and
// 130x70 in 128x128 blocks, e4m3 and e5m2, other block sizes) reads as the
// values DeepSeek's weight_dequant gives, bit for bit, in bfloat16 (the
// float32 product rounded to nearest even), float16 and float32; the
// scales are consumed and inspect's stored form is set.
func TestQuantFP8BlockUpstream(t *testing.T) {
	for _, args := range [][]string{
		{"fp8"},
		{"fp8", "e4m3", "128", "128", "float32"},
		{"fp8", "e5m2", "64", "32", "float16"},
		{"fp8", "e4m3", "1", "200", "bfloat16"},
		{"fp8", "e4m3", "1000", "7", "float32"},
	} {
		t.Run(strings.Join(args, "_"), func(t *testing.T) {
			ck := checkQuantValues(t, quantRelease(t, args...))
			q := ck.Tensor("model.layers.0.self_attn.q_proj.weight")
			if q.QuantStored == nil || q.QuantStored.Method != "fp8" || len(q.QuantStored.Companions) != 1 ||
				q.QuantStored.Companions[0] != "model.layers.0.self_attn.q_proj.weight_scale_inv" ||
				!strings.HasPrefix(q.QuantStored.DTypeName, "float8_") {
				t.Errorf("stored form %+v", q.QuantStored)
			}
			if ck.Quantization == nil || ck.Quantization.Schemes[0].Tensors != 3 {
				t.Errorf("quantization %+v", ck.Quantization)
			}
		})
	}
}

// TestQuantCompressedFloatUpstream: compressed-tensors float-quantized
// with six config groups (block, channel, group, tensor, and groups with
// activation ordering in weight_g_idx, bfloat16 and float32 scales;
// targets by regex, exact name and class) and an ignore list reads as
// compressed-tensors' _dequantize gives it (in the scale's dtype, then
// the model's), bit for bit, in bfloat16 and float32; the static input
// scale is consumed, ignored modules stay as stored.
func TestQuantCompressedFloatUpstream(t *testing.T) {
	for _, dt := range []string{"bfloat16", "float32"} {
		t.Run(dt, func(t *testing.T) {
			ck := checkQuantValues(t, quantRelease(t, "ct", dt))
			want := map[string]string{
				"model.layers.0.self_attn.q_proj.weight": "128x128 blocks",
				"model.layers.0.self_attn.o_proj.weight": "groups of 32",
				"model.layers.0.self_attn.v_proj.weight": "per tensor",
				"model.layers.0.mlp.up_proj.weight":      "per channel",
				"model.layers.0.mlp.down_proj.weight":    "per channel",
				"model.layers.0.mlp.gate_proj.weight":    "groups of 16, activation order in weight_g_idx",
				"model.layers.0.mlp.shared_proj.weight":  "groups of 32, activation order in weight_g_idx",
				"model.layers.0.self_attn.k_proj.weight": "",
			}
			for n, w := range want {
				q := ck.Tensor(n)
				if got := ""; q != nil && q.QuantStored != nil {
					got = q.QuantStored.Scheme
					if !strings.Contains(got, w) || w == "" {
						t.Errorf("%s: scheme %q, want %q", n, got, w)
					}
				} else if w != "" {
					t.Errorf("%s: not dequantized", n)
				}
			}
			if ck.Tensor("model.layers.0.self_attn.v_proj.input_scale") != nil {
				t.Error("input_scale kept")
			}
		})
	}
}

// TestQuantRawKeepsStored: WithRaw lists the stored codes and scales as
// they are.
func TestQuantRawKeepsStored(t *testing.T) {
	dir := quantRelease(t, "fp8")
	ck, err := statedict.Open(filepath.Join(dir, "release"), statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if len(ck.Tensors) != 8 || ck.Quantization != nil || ck.Tensor("model.layers.0.mlp.up_proj.weight_scale_inv") == nil {
		t.Errorf("raw: %d tensors, %+v", len(ck.Tensors), ck.Quantization)
	}
}
