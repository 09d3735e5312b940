package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestConvertGGUFFallbackSummary: --gguf-type q4_k on a model whose rows
// are 64 wide writes those weights as F16 (q4_K's blocks are 256), and
// the summary says how many, as what and why, in text and in --json
// (gguf_types), beside the 1-D tensors kept F32; the weights whose rows
// fit get q4_K and are counted so.
func TestConvertGGUFFallbackSummary(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	shapes := map[string][]int64{"a.weight": {4, 64}, "b.weight": {8, 64}, "c.weight": {2, 64}, "d.weight": {2, 256}, "e.norm.weight": {64}}
	data := map[string][]float32{}
	for n, s := range shapes {
		k := int64(1)
		for _, d := range s {
			k *= d
		}
		data[n] = randFloats(int(k), int64(len(n)))
	}
	writeSafetensorsF32(t, in, data, shapes)
	out := filepath.Join(dir, "out.gguf")
	args := []string{"convert", in, out, "--gguf-type", "q4_k", "--gguf-meta", "general.architecture=llama"}
	code, text, errs := runCLI(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"gguf: 1 tensors as q4_K, 4 not (--gguf-type could not apply):\n",
		"gguf:   3 tensors as f16: rows of 64 not a multiple of q4_K's 256 (first: a.weight)\n",
		"gguf:   1 tensors as f32: 1-D tensors stay F32 (llama.cpp's rule) (first: e.norm.weight)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	code, js, errs := runCLI(t, append(args, "--json", "--force")...)
	if code != exitOK {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var rep struct {
		GGUFTypes struct {
			Requested string         `json:"requested"`
			Written   map[string]int `json:"written"`
			Fallbacks []struct {
				Tensors int    `json:"tensors"`
				Type    string `json:"type"`
				Reason  string `json:"reason"`
				First   string `json:"first"`
			} `json:"fallbacks"`
			MXFP4Copied *int `json:"mxfp4_copied"`
		} `json:"gguf_types"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	g := rep.GGUFTypes
	if g.Requested != "q4_K" || g.Written["q4_K"] != 1 || g.Written["f16"] != 3 || g.Written["f32"] != 1 || len(g.Fallbacks) != 2 ||
		g.Fallbacks[0].Tensors != 3 || g.Fallbacks[0].Type != "f16" || g.Fallbacks[0].Reason != "rows of 64 not a multiple of q4_K's 256" ||
		g.MXFP4Copied == nil || *g.MXFP4Copied != 0 {
		t.Errorf("gguf_types: %s", js)
	}
}

// TestConvertMXFP4ToGGUF: gpt-oss's MXFP4 experts (the fixture made by
// scripts/gen_quant_fixtures.py, whose last group has the exponent 255)
// converted to GGUF, with and without config.json:
//   - as is, the copy is refused with one line naming the scales (ggml
//     reads 255 as a finite 2^127, transformers as Inf/NaN), nothing
//     written; --gguf-type f32 writes transformers' values (the fixture's
//     "expected", convert_moe_packed_tensors) in the stored orientation;
//   - with that exponent made 254, the expert tensor is ggml's MXFP4,
//     [experts, rows, cols] as stored, whose ggml dequantization is
//     transformers' values element for element in every other group, and
//     the summary says the blocks were copied.
func TestConvertMXFP4ToGGUF(t *testing.T) {
	fx, err := statedict.Open(filepath.Join("..", "..", "quant", "testdata", "mxfp4.safetensors"), statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := fx.Tensor(name).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	exp := fx.Tensor("expected")
	eb, blocks, scales := read("expected"), read("gate_up_proj_blocks"), read("gate_up_proj_scales")
	bshape, sshape := fx.Tensor("gate_up_proj_blocks").Shape, fx.Tensor("gate_up_proj_scales").Shape
	fx.Close()
	e, k, r := int(exp.Shape[0]), int(exp.Shape[1]), int(exp.Shape[2])
	want := func(x, i, j int) float32 { // stored [x, i, j] is transformers' [x, j, i]
		return math.Float32frombits(binary.LittleEndian.Uint32(eb[4*((x*k+j)*r+i):]))
	}
	patched := append([]byte{}, scales...)
	nan := map[int]bool{}
	for g, s := range scales {
		if s == 255 {
			patched[g], nan[g] = 254, true
		}
	}
	if len(nan) == 0 {
		t.Fatal("the fixture has no exponent 255 any more: the refusal goes unchecked")
	}
	name := "model.layers.0.mlp.experts.gate_up_proj"
	for _, conf := range []string{schemeCases()[0].config, ""} {
		for _, sc := range [][]byte{scales, patched} {
			dir := t.TempDir()
			writeST(t, filepath.Join(dir, "model.safetensors"), []string{name + "_blocks", name + "_scales"}, []string{"U8", "U8"},
				[][]int64{bshape, sshape}, [][]byte{blocks, sc})
			if conf != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(conf), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := filepath.Join(dir, "out.gguf")
			arch := []string{"--gguf-meta", "general.architecture=gpt-oss"}
			code, text, errs := runCLI(t, append([]string{"convert", dir, out}, arch...)...)
			if &sc[0] == &scales[0] {
				if code != exitError || !strings.Contains(errs, name+"_scales: exponent 0xff") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
					t.Errorf("exponent 255: exit %d, %q", code, errs)
				}
				if _, err := os.Stat(out); err == nil {
					t.Errorf("exponent 255: %s written", out)
				}
				if code, _, errs := runCLI(t, append([]string{"convert", dir, out, "--gguf-type", "f32"}, arch...)...); code != exitOK {
					t.Fatalf("--gguf-type f32: exit %d: %s", code, errs)
				}
				f, b := parseGGUF(t, out)
				data := tensorData(f, b, name)
				for x := 0; x < e; x++ {
					for i := 0; i < r; i++ {
						for j := 0; j < k; j++ {
							g, w := math.Float32frombits(binary.LittleEndian.Uint32(data[4*((x*r+i)*k+j):])), want(x, i, j)
							if g != w && !(g != g && w != w) {
								t.Fatalf("f32 [%d, %d, %d]: %g, transformers %g", x, i, j, g, w)
							}
						}
					}
				}
				continue
			}
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(text, "gguf: 1 MXFP4 tensors copied block for block") {
				t.Errorf("summary:\n%s", text)
			}
			f, b := parseGGUF(t, out)
			var ti *gguf.TensorInfo
			for i := range f.Tensors {
				if f.Tensors[i].Name == name {
					ti = &f.Tensors[i]
				}
			}
			if ti == nil || ti.Type != ggml.MXFP4 || !slices.Equal(ti.Dims, []uint64{uint64(k), uint64(r), uint64(e)}) {
				t.Fatalf("%s: %+v", name, ti)
			}
			got := make([]float32, e*k*r)
			if err := ggml.Dequantize(ggml.MXFP4, tensorData(f, b, name), got); err != nil {
				t.Fatal(err)
			}
			bad, checked := 0, 0
			for x := 0; x < e; x++ {
				for i := 0; i < r; i++ {
					for j := 0; j < k; j++ {
						if nan[(x*r+i)*(k/32)+j/32] {
							continue
						}
						checked++
						g, w := got[(x*r+i)*k+j], want(x, i, j)
						// ggml has no -0 (its table is int8): +0 for E2M1's -0.
						if math.Float32bits(g) != math.Float32bits(w) && !(g == 0 && w == 0) {
							if bad++; bad < 4 {
								t.Errorf("[%d, %d, %d]: ggml %g, transformers %g", x, i, j, g, w)
							}
						}
					}
				}
			}
			if checked < e*k*r-32*len(nan) {
				t.Errorf("checked %d of %d", checked, e*k*r)
			}
		}
	}
}
