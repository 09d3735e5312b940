package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestStackedGrid: a [3, 70, 45] float8 weight in 32x16 blocks (ragged
// in both directions within each expert) reads, over any range, as the
// three experts read one by one as the 2-D weights the grid codec (checked
// against DeepSeek's weight_dequant) decodes: no block of one expert
// reaches into the next, and each expert uses its own scales.
func TestStackedGrid(t *testing.T) {
	const E, R, C, bh, bw = 3, 70, 45, 32, 16
	sr, sc := (R+bh-1)/bh, (C+bw-1)/bw
	rng := rand.New(rand.NewSource(5))
	codes := make([]byte, E*R*C)
	rng.Read(codes)
	scales := make([]byte, 4*E*sr*sc)
	for i := 0; i < E*sr*sc; i++ {
		binary.LittleEndian.PutUint32(scales[4*i:], math.Float32bits(float32(rng.NormFloat64())))
	}
	w := Stored{Name: "m.experts.down_proj", DType: dtype.Float8E4M3FN, Shape: []int64{E, R, C}}
	s := Stored{Name: "m.experts.down_proj_scale_inv", DType: dtype.Float32, Shape: []int64{E, int64(sr), int64(sc)}}
	c, err := newStackedGrid(w, s, bh, bw, dtype.Float32)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, E*R*C)
	for e := 0; e < E; e++ {
		g, err := newGrid(Stored{Name: "x", DType: w.DType, Shape: []int64{R, C}}, Stored{Name: "s", DType: dtype.Float32, Shape: []int64{int64(sr), int64(sc)}}, bh, bw, dtype.Float32)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Dequantize(want[e*R*C:(e+1)*R*C], 0, codes[e*R*C:(e+1)*R*C], [][]byte{scales[4*e*sr*sc : 4*(e+1)*sr*sc]}); err != nil {
			t.Fatal(err)
		}
	}
	for k := 0; k < 200; k++ {
		first := rng.Int63n(E * R * C)
		n := 1 + rng.Int63n(E*R*C-first)
		if k == 0 {
			first, n = 0, E*R*C
		}
		b, e := c.CodeSpan(first, n)
		got := make([]float32, n)
		if err := c.Dequantize(got, first, codes[b:e], [][]byte{scales}); err != nil {
			t.Fatalf("[%d, %d): %v", first, first+n, err)
		}
		for i, v := range got {
			if math.Float32bits(v) != math.Float32bits(want[first+int64(i)]) && !(v != v && want[first+int64(i)] != want[first+int64(i)]) {
				t.Fatalf("[%d, %d): element %d is %v, want %v", first, first+n, first+int64(i), v, want[first+int64(i)])
			}
		}
	}
	// The one-pass path (DequantizeTo, slice by slice into the grid's
	// tables) gives the staged path's bytes, ranges across experts too.
	checkEncode(t, c, E*R*C, codes, [][]byte{scales}, rng)
	// Scales whose leading dimensions are not the weight's, or of the
	// wrong rank, are refused as a companion of the wrong shape; so are
	// companions of the wrong size at decode time.
	for _, sh := range [][]int64{{E + 1, int64(sr), int64(sc)}, {int64(sr), int64(sc)}, {E, int64(sr) + 1, int64(sc)}, {1, E, int64(sr), int64(sc)}} {
		bad := s
		bad.Shape = sh
		if _, err := newStackedGrid(w, bad, bh, bw, dtype.Float32); !errors.Is(err, ErrCompanionShape) {
			t.Errorf("scale %v: %v, want ErrCompanionShape", sh, err)
		}
	}
	if _, err := newStackedGrid(Stored{Name: "z", DType: w.DType, Shape: []int64{0, R, C}}, Stored{Name: "s", DType: dtype.Float32, Shape: []int64{0, int64(sr), int64(sc)}}, bh, bw, dtype.Float32); err == nil {
		t.Error("no experts: accepted")
	}
	if err := c.Dequantize(make([]float32, 10), 0, codes[:10], [][]byte{scales[:8]}); !errors.Is(err, ErrCompanionShape) {
		t.Errorf("short scales: %v", err)
	}
}

// TestQuantizeFusedExperts: fp8-block takes transformers' fused expert
// projections (3-D, named ...experts.gate_up_proj / up_proj / down_proj)
// with the scale's leading dimension kept, leaves a fused tensor whose
// experts are not whole blocks as it is (upstream does), and takes no
// other 3-D tensor.
func TestQuantizeFusedExperts(t *testing.T) {
	spec := QuantizeSpec{Scheme: SchemeFP8Block, Block: [2]int64{128, 128}}
	q, why := NewQuantizer(spec, "model.layers.3.mlp.experts.gate_up_proj", dtype.BFloat16, []int64{8, 256, 384}, nil)
	if why != "" {
		t.Fatal(why)
	}
	out := q.Outputs()
	if len(out) != 2 || out[0].Name != "model.layers.3.mlp.experts.gate_up_proj" || shapeText(out[0].Shape) != "[8, 256, 384]" ||
		out[1].Name != "model.layers.3.mlp.experts.gate_up_proj_scale_inv" || shapeText(out[1].Shape) != "[8, 2, 3]" || out[1].DType != dtype.Float32 {
		t.Fatalf("outputs %+v", out)
	}
	if _, why := NewQuantizer(spec, "model.layers.3.mlp.experts.down_proj", dtype.BFloat16, []int64{8, 200, 256}, nil); why == "" {
		t.Error("experts of 200 rows: quantized, want left as they are")
	}
	for _, n := range []string{"model.layers.3.mlp.experts.gate_up_proj_bias", "model.conv.weight", "model.layers.3.mlp.experts.0.weight"} {
		if _, why := NewQuantizer(spec, n, dtype.BFloat16, []int64{8, 256, 384}, nil); why == "" {
			t.Errorf("%s [8, 256, 384]: quantized", n)
		}
	}
	if _, why := NewQuantizer(spec, "model.layers.3.mlp.experts.gate_up_proj", dtype.BFloat16, []int64{8, 256, 384}, []string{"*.experts.*"}); why == "" {
		t.Error("--ignore *.experts.*: quantized")
	}
}
