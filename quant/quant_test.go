package quant_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
)

const blockConf = `{"quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [%d, %d]}}`

func f32s(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// TestFP8RaggedBlocks: a 3x5 weight in 2x2 blocks has a 2x3 scale grid;
// element (r, c) takes scale [r/2, c/2], the last row and column of
// blocks ragged, and any element range decodes alone.
func TestFP8RaggedBlocks(t *testing.T) {
	ts := []quant.Stored{{Name: "w", DType: dtype.Float8E4M3FN, Shape: []int64{3, 5}}, {Name: "w_scale_inv", DType: dtype.Float32, Shape: []int64{2, 3}}}
	p, err := quant.Detect([]byte(fmt.Sprintf(blockConf, 2, 2)), ts)
	if err != nil || p == nil || len(p.Groups) != 1 {
		t.Fatalf("%v %+v", err, p)
	}
	g := p.Groups[0]
	codes := make([]byte, 15)
	for i := range codes {
		codes[i] = 0x38 // 1.0 in e4m3fn
	}
	scales := f32s(1, 2, 3, 4, 5, 6)
	want := []float32{1, 1, 2, 2, 3, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6}
	for first := 0; first < 15; first++ {
		for n := 1; first+n <= 15; n++ {
			dst := make([]float32, n)
			if err := g.Codec.Dequantize(dst, int64(first), codes[first:first+n], [][]byte{scales}); err != nil {
				t.Fatal(err)
			}
			for i, v := range dst {
				if v != want[first+i] {
					t.Fatalf("[%d:%d] element %d = %v, want %v", first, first+n, first+i, v, want[first+i])
				}
			}
		}
	}
	if g.DType != dtype.BFloat16 || g.Scheme != "fp8 e4m3, 2x2 blocks, scales in w_scale_inv" {
		t.Errorf("%s %q", g.DType, g.Scheme)
	}
}

// TestDetectRefusals: each refusal is an *Error naming the scheme and the
// tensor, matching its sentinel.
func TestDetectRefusals(t *testing.T) {
	w := quant.Stored{Name: "m.weight", DType: dtype.Float8E4M3FN, Shape: []int64{300, 200}}
	sc := func(shape ...int64) quant.Stored {
		return quant.Stored{Name: "m.weight_scale_inv", DType: dtype.Float32, Shape: shape}
	}
	for _, c := range []struct {
		name   string
		conf   string
		ts     []quant.Stored
		target error
	}{
		{"no config, blocks not 128x128", "", []quant.Stored{w, sc(5, 4)}, quant.ErrCompanionShape},
		{"no scale", fmt.Sprintf(blockConf, 128, 128), []quant.Stored{w}, quant.ErrMissingCompanion},
		{"scale shape", fmt.Sprintf(blockConf, 128, 128), []quant.Stored{w, sc(2, 2)}, quant.ErrCompanionShape},
		{"scale 1-D", fmt.Sprintf(blockConf, 128, 128), []quant.Stored{w, sc(6)}, quant.ErrCompanionShape},
		{"block 0", fmt.Sprintf(blockConf, 0, 128), []quant.Stored{w, sc(3, 2)}, quant.ErrUnknownLayout},
		{"block huge", fmt.Sprintf(blockConf, 1<<40, 128), []quant.Stored{w, sc(1, 2)}, quant.ErrUnknownLayout},
		{"unknown method", `{"quantization_config": {"quant_method": "nope"}}`, []quant.Stored{w, sc(3, 2)}, quant.ErrUnknownScheme},
		{"unknown ct format", `{"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {"targets": ["Linear"], "weights": {"strategy": "tensor"}, "format": "weird"}}}}`,
			[]quant.Stored{w, {Name: "m.weight_scale", DType: dtype.Float32, Shape: []int64{1}}}, quant.ErrUnknownScheme},
		{"ct ignored but scaled", `{"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["m"], "config_groups": {"g": {"targets": ["Linear"], "weights": {"strategy": "tensor"}}}}}`,
			[]quant.Stored{w, {Name: "m.weight_scale", DType: dtype.Float32, Shape: []int64{1}}}, quant.ErrMissingCompanion},
		{"bad json", `{"quantization_config": [`, []quant.Stored{w}, quant.ErrConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := quant.Detect([]byte(c.conf), c.ts)
			var qe *quant.Error
			if !errors.Is(err, c.target) || !errors.As(err, &qe) || qe.Scheme == "" && c.target != quant.ErrConfig {
				t.Fatalf("%v, want %v with a scheme", err, c.target)
			}
			if c.target != quant.ErrConfig && qe.Tensor != "m.weight" {
				t.Errorf("names tensor %q: %v", qe.Tensor, err)
			}
		})
	}
}

// TestDetectFP8ByNames: without a config, a float8 weight beside a float32
// weight_scale_inv is DeepSeek's block FP8 with the default 128x128 blocks.
func TestDetectFP8ByNames(t *testing.T) {
	w := quant.Stored{Name: "m.weight", DType: dtype.Float8E4M3FN, Shape: []int64{300, 200}}
	s := quant.Stored{Name: "m.weight_scale_inv", DType: dtype.Float32, Shape: []int64{3, 2}}
	p, err := quant.Detect(nil, []quant.Stored{w, s})
	if err != nil {
		t.Fatal(err)
	}
	if p.Method != "fp8" || len(p.Groups) != 1 || !strings.Contains(p.Groups[0].Scheme, "128x128 blocks") {
		t.Fatalf("plan %+v", p)
	}
}

// FuzzDetect: any shapes, block sizes and scale bytes give a plan or an
// error, never a panic; a plan's codec decodes exactly the elements
// asked for from codes of that size, NaN scales giving NaN.
func FuzzDetect(f *testing.F) {
	f.Add(int64(300), int64(200), int64(128), int64(128), int64(3), int64(2), uint32(0x7fc00000))
	f.Add(int64(1), int64(1), int64(0), int64(1), int64(1), int64(1), uint32(0x3f800000))
	f.Add(int64(5), int64(7), int64(1<<31), int64(1), int64(1), int64(7), uint32(1))
	f.Fuzz(func(t *testing.T, rows, cols, bh, bw, sr, sc int64, scale uint32) {
		ts := []quant.Stored{{Name: "w", DType: dtype.Float8E4M3FN, Shape: []int64{rows, cols}},
			{Name: "w_scale_inv", DType: dtype.Float32, Shape: []int64{sr, sc}}}
		p, err := quant.Detect([]byte(fmt.Sprintf(blockConf, bh, bw)), ts)
		if err != nil {
			var qe *quant.Error
			if !errors.As(err, &qe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		g := p.Groups[0]
		if g.Shape[0] != rows || g.Shape[1] != cols || sr != (rows+bh-1)/bh || sc != (cols+bw-1)/bw {
			t.Fatalf("accepted %dx%d in %dx%d blocks with %dx%d scales", rows, cols, bh, bw, sr, sc)
		}
		n := min(rows*cols, 4096)
		scales := make([]byte, 4*sr*sc)
		if sr*sc > 1<<16 {
			return
		}
		for i := int64(0); i < sr*sc; i++ {
			binary.LittleEndian.PutUint32(scales[4*i:], scale)
		}
		dst := make([]float32, n)
		if err := g.Codec.Dequantize(dst, rows*cols-n, make([]byte, n), [][]byte{scales}); err != nil {
			t.Fatal(err)
		}
		s := math.Float32frombits(scale)
		for _, v := range dst {
			if s != s && v == v || s == s && !math.IsInf(float64(s), 0) && v != 0 {
				t.Fatalf("code 0 with scale %v gave %v", s, v)
			}
		}
		if err := g.Codec.Dequantize(dst, 0, make([]byte, n), [][]byte{scales[:len(scales)-1]}); err == nil {
			t.Fatal("short scales accepted")
		}
	})
}

// TestDetectPackedByNames: without a config, the companions of an
// integer-packed weight are refused (an element-wise cast of the codes
// would be wrong values), but the same names beside a weight that is not
// packed are a plain model's tensors.
func TestDetectPackedByNames(t *testing.T) {
	st := func(n string, d dtype.DType) quant.Stored {
		return quant.Stored{Name: n, DType: d, Shape: []int64{4, 4}}
	}
	for _, c := range []struct {
		tensors []quant.Stored
		refused string
	}{
		{[]quant.Stored{st("l.qweight", dtype.Int32), st("l.qzeros", dtype.Int32), st("l.scales", dtype.Float16)}, "l.qzeros"},
		{[]quant.Stored{st("l.weight", dtype.Uint32), st("l.scales", dtype.BFloat16), st("l.biases", dtype.BFloat16)}, "l.biases"},
		{[]quant.Stored{st("l.weight", dtype.Int8), st("l.SCB", dtype.Float32)}, "l.SCB"},
		{[]quant.Stored{st("l.weight_packed", dtype.Int32), st("l.weight_scale", dtype.BFloat16)}, "l.weight_packed"},
		{[]quant.Stored{st("l.weight", dtype.Float32), st("l.biases", dtype.Float32)}, ""},
		{[]quant.Stored{st("l.weight", dtype.BFloat16), st("l.SCB", dtype.Float32)}, ""},
		{[]quant.Stored{st("l.xqzeros", dtype.Int32), st("l.xqweight", dtype.Int32)}, ""},
	} {
		p, err := quant.Detect(nil, c.tensors)
		var e *quant.Error
		switch {
		case c.refused == "" && (err != nil || p != nil):
			t.Errorf("%v: %v %v", c.tensors, p, err)
		case c.refused != "" && (!errors.As(err, &e) || e.Tensor != c.refused || !errors.Is(err, quant.ErrMissingCompanion)):
			t.Errorf("%v: %v, want %s refused", c.tensors, err, c.refused)
		}
	}
}

// TestDetectRowBound: a quantized weight whose rows are longer than ckpt
// decodes at once (a 1-D bitsandbytes shape of 2^25 elements) is refused
// before anything is read, not decoded row by whole row.
func TestDetectRowBound(t *testing.T) {
	state := []byte(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [33554432]}`)
	ts := []quant.Stored{
		{Name: "m.weight", DType: dtype.Uint8, Shape: []int64{1 << 24, 1}},
		{Name: "m.weight.absmax", DType: dtype.Float32, Shape: []int64{1 << 19}},
		{Name: "m.weight.quant_state.bitsandbytes__nf4", DType: dtype.Uint8, Shape: []int64{int64(len(state))},
			Read: func() ([]byte, error) { return state, nil }},
	}
	_, err := quant.Detect(nil, ts)
	if !errors.Is(err, quant.ErrUnknownLayout) || !strings.Contains(err.Error(), "rows of 33554432") {
		t.Fatalf("%v", err)
	}
	// The same weight as [2^12, 2^13] rows is read.
	state = []byte(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4096, 8192]}`)
	if p, err := quant.Detect(nil, ts); err != nil || p == nil || len(p.Groups) != 1 {
		t.Fatalf("%v %v", p, err)
	}
}
