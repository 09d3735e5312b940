package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// TestQuantizeInteropUpstream runs the upstream quantizers, re-expressed
// in torch (testdata/quantize_ref.py, sources cited there), on the same
// bfloat16 input and requires ckpt's codes and scales to be the same
// bytes; and the upstream dequantization of ckpt's output (DeepSeek's
// weight_dequant, transformers' convert_moe_packed_tensors and, for fused
// experts [E, out, in], Fp8Dequantize) to give the float32 values of
// ckpt's own dequantizer, bit for bit.
func TestQuantizeInteropUpstream(t *testing.T) {
	const R, C = 128, 96
	m := randMatrix(R*C, 7, dtype.BFloat16)
	m[0], m[C+1] = 0, float32(math.Copysign(0, -1))
	for i := 2 * C; i < 2*C+32; i++ {
		m[i] = 0 // zero groups and blocks
	}
	dir, err := os.MkdirTemp("", "ckpt-quantref")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	x := make([]byte, 2*len(m))
	dtype.EncodeFloat32(dtype.BFloat16, x, m)
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name+".bin"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("x", x)
	script, err := os.ReadFile(filepath.Join("testdata", "quantize_ref.py"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "quantize_ref.py"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	// Run in dir (under /tmp, which scripts/torch2-python's chroot sees).
	probe := exec.Command(testenv.Python(), "-c", "import torch; torch.float8_e4m3fn")
	probe.Dir = dir
	if b, err := probe.CombinedOutput(); err != nil {
		if os.Getenv("CKPT_REQUIRE_INTEROP") == "all" {
			t.Fatalf("%s has no torch with float8_e4m3fn: %v\n%s", testenv.Python(), err, b)
		}
		t.Skipf("needs torch >= 2.1 (CKPT_PYTHON=scripts/torch2-python): %v", err)
	}
	mine := map[string][][]byte{}
	for _, c := range []struct {
		key   string
		spec  QuantizeSpec
		name  string
		shape []int64
	}{
		{"fp8block", QuantizeSpec{Scheme: SchemeFP8Block, Block: [2]int64{32, 32}}, "a.weight", []int64{R, C}},
		{"fp8channel", QuantizeSpec{Scheme: SchemeFP8Channel}, "a.weight", []int64{R, C}},
		{"nvfp4", QuantizeSpec{Scheme: SchemeNVFP4}, "a.weight", []int64{R, C}},
		{"mxfp4", QuantizeSpec{Scheme: SchemeMXFP4}, "mlp.experts.down_proj", []int64{2, R / 2, C}},
		{"fp8block3d", QuantizeSpec{Scheme: SchemeFP8Block, Block: [2]int64{32, 32}}, "model.layers.0.mlp.experts.gate_up_proj", []int64{4, R / 4, C}},
	} {
		q, skip := NewQuantizer(c.spec, c.name, dtype.BFloat16, c.shape, nil)
		if skip != "" {
			t.Fatal(skip)
		}
		out := runQuantizer(t, q, m)
		mine[c.key] = out
		write("ckpt_"+c.key+"_codes", out[0])
		write("ckpt_"+c.key+"_scale", out[1])
	}
	cmd := exec.Command(testenv.Python(), "quantize_ref.py", dir, "128", "96")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("quantize_ref.py: %v\n%s", err, b)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct{ key, part string }{
		{"fp8block", "codes"}, {"fp8block", "scale"}, {"fp8channel", "codes"}, {"fp8channel", "scale"},
		{"nvfp4", "codes"}, {"nvfp4", "scale"}, {"mxfp4", "codes"}, {"mxfp4", "scale"},
		{"fp8block3d", "codes"}, {"fp8block3d", "scale"},
	} {
		ours := mine[c.key][0]
		if c.part == "scale" {
			ours = mine[c.key][1]
		}
		if up := read(c.key + "_" + c.part); !bytes.Equal(ours, up) {
			t.Errorf("%s %s differ from upstream's: %s", c.key, c.part, firstDiff(ours, up))
		}
	}
	if up := read("nvfp4_global"); !bytes.Equal(mine["nvfp4"][2], up) {
		t.Errorf("nvfp4 global scale %x, upstream %x", mine["nvfp4"][2], up)
	}
	// Upstream dequantization of ckpt's output = ckpt's dequantizer.
	g, err := newGrid(Stored{Name: "a.weight", DType: dtype.Float8E4M3FN, Shape: []int64{R, C}},
		Stored{Name: "a.weight_scale_inv", DType: dtype.Float32, Shape: []int64{R / 32, C / 32}}, 32, 32, dtype.Float32)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, R*C)
	if err := g.Dequantize(got, 0, mine["fp8block"][0], mine["fp8block"][1:]); err != nil {
		t.Fatal(err)
	}
	compareF32(t, "fp8block dequantized", got, read("fp8block_deq"))
	// Fused experts [4, R/4, C], 32x32 blocks per expert, read back by
	// the stacked codec: transformers' Fp8Dequantize of ckpt's output.
	g3, err := newStackedGrid(Stored{Name: "e", DType: dtype.Float8E4M3FN, Shape: []int64{4, R / 4, C}},
		Stored{Name: "e_scale_inv", DType: dtype.Float32, Shape: []int64{4, R / 4 / 32, C / 32}}, 32, 32, dtype.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if err := g3.Dequantize(got, 0, mine["fp8block3d"][0], mine["fp8block3d"][1:]); err != nil {
		t.Fatal(err)
	}
	compareF32(t, "fp8block3d dequantized", got, read("fp8block3d_deq"))
	l := MXFP4Layout{Prefix: []int{2, C}, Groups: R / 2 / 32}
	if err := l.DequantTransposedRows(got, mine["mxfp4"][0], mine["mxfp4"][1], 0, R); err != nil {
		t.Fatal(err)
	}
	compareF32(t, "mxfp4 dequantized", got, read("mxfp4_deq"))
}

func compareF32(t *testing.T, what string, got []float32, want []byte) {
	t.Helper()
	if len(want) != 4*len(got) {
		t.Fatalf("%s: %d bytes from upstream, want %d", what, len(want), 4*len(got))
	}
	for i, g := range got {
		w := math.Float32frombits(binary.LittleEndian.Uint32(want[4*i:]))
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: element %d is %v, upstream %v", what, i, g, w)
		}
	}
}

func firstDiff(a, b []byte) string {
	if len(a) != len(b) {
		return fmt.Sprintf("lengths %d and %d", len(a), len(b))
	}
	n, first := 0, -1
	for i := range a {
		if a[i] != b[i] {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	return fmt.Sprintf("%d bytes, first at %d: %#x vs %#x", n, first, a[first], b[first])
}
