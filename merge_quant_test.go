package ckpt

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// bf16ULP is the spacing of bfloat16 values at |v|.
func bf16ULP(v float32) float64 {
	_, e := math.Frexp(math.Abs(float64(v)))
	return math.Ldexp(1, max(e-8, -133))
}

// TestInteropMergeFP8Base: a LoRA merged into a block-FP8 base (ckpt's
// own fp8-block:8x8 quantization of the test model, four blocks a weight)
// is the dequantized base plus the delta: against peft_ref.py's fp8
// (DeepSeek-V3's weight_dequant to bfloat16, then PEFT's merge in float32
// cast back), every merged element within one bfloat16 step (the float32
// sums differ in order by a few float32 epsilons, which moves a rounding
// to bfloat16 by at most one step), the delta present (not the
// dequantized base, the bug of axolotl#3771), and the quantized weights
// no adapter touches written as exactly their dequantized values.
func TestInteropMergeFP8Base(t *testing.T) {
	testenv.Require(t, "torch", "safetensors.torch")
	dir := t.TempDir()
	refPy(t, dir, "make", dir)
	spec, err := ParseQuantize("fp8-block:8x8")
	if err != nil {
		t.Fatal(err)
	}
	qdir := filepath.Join(dir, "fp8") + "/"
	ck, err := Open(context.Background(), filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := Convert(context.Background(), ck, qdir, ConvertWithQuantize(spec)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "merged.safetensors")
	adapter := filepath.Join(dir, "plain", "a0")
	rep, err := Merge(context.Background(), qdir, out, []MergeAdapter{{adapter, 1}})
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(dir, "fp8_ref.safetensors")
	refPy(t, dir, "fp8", qdir, adapter, ref)
	want, _ := readFloats(t, ref)
	got, _ := readFloats(t, out)
	merged, untouched, exact, elems := 0, 0, 0, 0
	for k, deq := range want {
		name, ok := strings.CutSuffix(k, ".dequantized")
		if !ok {
			continue
		}
		g := got[name]
		if len(g) != len(deq) {
			t.Fatalf("%s: %d elements merged, %d in the reference", name, len(g), len(deq))
		}
		w, isMerged := want[name]
		if !isMerged {
			untouched++
			for i := range deq {
				if math.Float32bits(g[i]) != math.Float32bits(deq[i]) {
					t.Fatalf("%s[%d]: no adapter, %v written, dequantized %v", name, i, g[i], deq[i])
				}
			}
			continue
		}
		merged++
		moved := 0
		for i := range w {
			elems++
			if g[i] == w[i] {
				exact++
			} else if d := math.Abs(float64(g[i]) - float64(w[i])); d > bf16ULP(w[i]) {
				t.Fatalf("%s[%d]: ckpt %v, reference %v: more than one bfloat16 step (%g)", name, i, g[i], w[i], bf16ULP(w[i]))
			}
			if g[i] != deq[i] {
				moved++
			}
		}
		if moved < len(w)/2 {
			t.Errorf("%s: only %d of %d elements differ from the dequantized base: the delta is missing", name, moved, len(w))
		}
	}
	if merged != 4 || untouched != 4 || rep.Merged != 4 {
		t.Errorf("%d merged (report %d), %d untouched quantized weights; want 4 and 4", merged, rep.Merged, untouched)
	}
	t.Logf("%d of %d merged elements equal to the reference's bits, the rest one bfloat16 step away", exact, elems)
}

// TestMergeQuantizeRoundTrip: merging with --quantize (a convert option
// passed through Merge) quantizes each merged weight with its delta: the
// output is byte for byte ckpt's quantizer applied to the merged dense
// output, and not the base's own quantization (a quantizer reading the
// stored weights would drop the delta, silently).
func TestMergeQuantizeRoundTrip(t *testing.T) {
	testenv.Require(t, "torch", "safetensors.torch")
	dir := t.TempDir()
	refPy(t, dir, "make", dir)
	ctx := context.Background()
	base := filepath.Join(dir, "model.safetensors")
	adapter := []MergeAdapter{{filepath.Join(dir, "plain", "a0"), 1}}
	for _, scheme := range []string{"fp8-block:8x8", "fp8-channel"} {
		spec, err := ParseQuantize(scheme)
		if err != nil {
			t.Fatal(err)
		}
		sub := filepath.Join(dir, strings.ReplaceAll(scheme, ":", "_"))
		direct := filepath.Join(sub, "direct") + "/"
		if _, err := Merge(ctx, base, direct, adapter, MergeWithConvertOptions(ConvertWithQuantize(spec))); err != nil {
			t.Fatal(err)
		}
		dense := filepath.Join(sub, "dense.safetensors")
		if _, err := Merge(ctx, base, dense, adapter); err != nil {
			t.Fatal(err)
		}
		quantize := func(in, out string) []byte {
			ck, err := Open(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if _, err := Convert(ctx, ck, out, ConvertWithQuantize(spec)); err != nil {
				t.Fatal(err)
			}
			return readFile(t, filepath.Join(out, "model.safetensors"))
		}
		want := quantize(dense, filepath.Join(sub, "roundtrip")+"/")
		unmerged := quantize(base, filepath.Join(sub, "base")+"/")
		got := readFile(t, filepath.Join(direct, "model.safetensors"))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: merge --quantize differs from quantizing the merged output", scheme)
		}
		if bytes.Equal(got, unmerged) {
			t.Errorf("%s: merge --quantize wrote the base's own quantization: the delta was dropped", scheme)
		}
	}
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
