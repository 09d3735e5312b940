package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// schemeCase is one quantized release built from a fixture of
// quant/testdata (made by scripts/gen_quant_fixtures.py from the upstream
// dequantizers): the stored tensors under the names the upstream tool
// saves, the config.json it writes, and the fixture tensor holding
// upstream's values of the logical weight.
type schemeCase struct {
	name, fixture string
	tensors       [][2]string       // release name, fixture name
	dts           map[string]string // safetensors dtype overrides by release name
	config        string            // "" for none
	logical       string            // the dequantized weight's name
	expected      string            // fixture tensor of upstream's values (in the logical dtype)
	scheme        string            // what inspect's scheme line says
	bad           string            // a companion whose first dimension, shortened, must be refused
}

const (
	ctNVFP4 = `{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
 "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": true}}},
 "ignore": ["lm_head"]}}`
	gptqConf = `{"torch_dtype": "float16", "quantization_config": {"quant_method": "gptq", "bits": %d, "group_size": 32, "desc_act": %s, "sym": false, "checkpoint_format": "%s"}}`
)

func ctPacked(dt, format string, bits int, strategy string, group int, sym bool) string {
	return strings.NewReplacer("DT", dt, "FMT", format, "BITS", itoa(bits), "STRAT", strategy, "GS", itoa(group), "SYM", map[bool]string{true: "true", false: "false"}[sym]).Replace(
		`{"torch_dtype": "DT", "quantization_config": {"quant_method": "compressed-tensors", "format": "FMT",
 "config_groups": {"attn": {"targets": ["re:.*self_attn.*"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": true}},
  "mlp": {"targets": ["Linear"], "weights": {"num_bits": BITS, "type": "int", "strategy": "STRAT", "group_size": GS, "symmetric": SYM}}},
 "ignore": ["lm_head", "re:.*router"]}}`)
}

func itoa(n int) string { return strconv.Itoa(n) }

func gptqCase(name string, bits int, v2 bool) schemeCase {
	p, f, act := "model.layers.0.self_attn.q_proj.", "gptq", "false"
	if v2 {
		f = "gptq_v2"
	}
	if strings.HasSuffix(name, "act") {
		act = "true"
	}
	return schemeCase{name: "gptq " + name, fixture: "gptq", config: strings.Replace(strings.Replace(strings.Replace(gptqConf, "%d", itoa(bits), 1), "%s", act, 1), "%s", f, 1),
		tensors: [][2]string{{p + "qweight", name + ".qweight"}, {p + "qzeros", name + ".qzeros"}, {p + "scales", name + ".scales"}, {p + "g_idx", name + ".g_idx"}},
		logical: p + "weight", expected: name + ".expected_native", scheme: "gptq int" + itoa(bits) + " (" + f + ")", bad: p + "scales"}
}

func bnbCase(name, fix, qt, dt, expected string, nested bool) schemeCase {
	w := "model.layers.0.mlp.up_proj.weight"
	c := schemeCase{name: "bitsandbytes " + name, fixture: "bnb", logical: w, expected: expected, scheme: "bitsandbytes " + qt, bad: w + ".absmax",
		config: `{"torch_dtype": "` + dt + `", "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "` + qt + `", "bnb_4bit_use_double_quant": ` + map[bool]string{true: "true", false: "false"}[nested] + `}}`,
		tensors: [][2]string{{w, fix + ".weight"}, {w + ".absmax", fix + ".weight.absmax"}, {w + ".quant_map", fix + ".weight.quant_map"},
			{w + ".quant_state.bitsandbytes__" + qt, fix + ".weight.quant_state.bitsandbytes__" + qt}}}
	if nested {
		c.tensors = append(c.tensors, [2]string{w + ".nested_absmax", fix + ".weight.nested_absmax"}, [2]string{w + ".nested_quant_map", fix + ".weight.nested_quant_map"})
		c.bad = w + ".nested_quant_map"
	}
	return c
}

func mlxCase(name, dt, quant string) schemeCase {
	p := "model.layers.0.mlp.up_proj."
	return schemeCase{name: "mlx " + name, fixture: "mlx", config: `{"torch_dtype": "` + dt + `", "quantization": ` + quant + `}`,
		tensors: [][2]string{{p + "weight", name + ".weight"}, {p + "scales", name + ".scales"}, {p + "biases", name + ".biases"}},
		dts:     map[string]string{p + "weight": "U32"}, logical: p + "weight", expected: name + ".expected", scheme: "mlx affine", bad: p + "biases"}
}

func schemeCases() []schemeCase {
	mx := "model.layers.0.mlp.experts.gate_up_proj"
	mxT := [][2]string{{mx + "_blocks", "gate_up_proj_blocks"}, {mx + "_scales", "gate_up_proj_scales"}}
	nv := "model.layers.0.mlp.down_proj."
	pk := func(c, format string) [][2]string {
		p := "model.layers.0.mlp.gate_proj."
		out := [][2]string{{p + "weight_scale", c + ".weight_scale"}}
		if format == "int" {
			return append(out, [2]string{p + "weight", c + ".weight"}, [2]string{p + "weight_zero_point", c + ".weight_zero_point"})
		}
		out = append(out, [2]string{p + "weight_packed", c + ".weight_packed"}, [2]string{p + "weight_shape", c + ".weight_shape"})
		if strings.HasSuffix(c, "asym") {
			out = append(out, [2]string{p + "weight_zero_point", c + ".weight_zero_point"})
		}
		return out
	}
	pg := "model.layers.0.mlp.gate_proj."
	aw := "model.layers.0.mlp.down_proj."
	// Activation ordering (compressed-tensors weight_g_idx): the
	// packed_gidx fixture's cases.
	act := func(c, format string) [][2]string {
		return append(pk(c, format), [2]string{pg + "weight_g_idx", c + ".weight_g_idx"})
	}
	return []schemeCase{
		{name: "mxfp4", fixture: "mxfp4", tensors: mxT, logical: mx, expected: "expected_native", scheme: "mxfp4 (gpt-oss)", bad: mx + "_scales",
			config: `{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]}}`},
		{name: "mxfp4 by names", fixture: "mxfp4", tensors: mxT, logical: mx, expected: "expected_native", scheme: "mxfp4 (gpt-oss)", bad: mx + "_scales"},
		{name: "nvfp4", fixture: "nvfp4", config: ctNVFP4, logical: nv + "weight", expected: "expected_native", scheme: "nvfp4-pack-quantized", bad: nv + "weight_scale",
			tensors: [][2]string{{nv + "weight_packed", "weight_packed"}, {nv + "weight_scale", "weight_scale"}, {nv + "weight_global_scale", "weight_global_scale"}}},
		{name: "pack-quantized w4 g16 asym", fixture: "packed", config: ctPacked("bfloat16", "pack-quantized", 4, "group", 16, false), tensors: pk("w4g16asym", ""),
			logical: pg + "weight", expected: "w4g16asym.expected_native", scheme: "pack-quantized int4, groups of 16, zero points", bad: pg + "weight_scale"},
		{name: "pack-quantized w3 g32 asym", fixture: "packed", config: ctPacked("float32", "pack-quantized", 3, "group", 32, false), tensors: pk("w3g32asym", ""),
			logical: pg + "weight", expected: "w3g32asym.expected_native", scheme: "pack-quantized int3, groups of 32", bad: pg + "weight_scale"},
		{name: "pack-quantized w4 g32 sym", fixture: "packed", config: ctPacked("bfloat16", "pack-quantized", 4, "group", 32, true), tensors: pk("w4g32sym", ""),
			logical: pg + "weight", expected: "w4g32sym.expected_native", scheme: "pack-quantized int4, groups of 32, symmetric", bad: pg + "weight_scale"},
		{name: "pack-quantized w8 channel", fixture: "packed", config: ctPacked("float16", "pack-quantized", 8, "channel", 0, true), tensors: pk("w8chsym", ""),
			logical: pg + "weight", expected: "w8chsym.expected_native", scheme: "pack-quantized int8, per channel", bad: pg + "weight_scale"},
		{name: "int-quantized w8", fixture: "packed", config: ctPacked("bfloat16", "int-quantized", 8, "channel", 0, false), tensors: pk("w8int", "int"),
			logical: pg + "weight", expected: "w8int.expected_native", scheme: "int-quantized int8, per channel, zero points", bad: pg + "weight_zero_point"},
		{name: "pack-quantized w4 g16 asym act-order", fixture: "packed_gidx", config: ctPacked("bfloat16", "pack-quantized", 4, "group", 16, false), tensors: act("w4g16asym", ""),
			logical: pg + "weight", expected: "w4g16asym.expected_native", scheme: "pack-quantized int4, groups of 16, activation order in weight_g_idx, zero points", bad: pg + "weight_g_idx"},
		{name: "pack-quantized w4 g32 sym act-order int64", fixture: "packed_gidx", config: ctPacked("float16", "pack-quantized", 4, "group", 32, true), tensors: act("w4g32sym", ""),
			logical: pg + "weight", expected: "w4g32sym.expected_native", scheme: "pack-quantized int4, groups of 32, activation order in weight_g_idx, symmetric", bad: pg + "weight_g_idx"},
		{name: "int-quantized w8 g16 act-order", fixture: "packed_gidx", config: ctPacked("bfloat16", "int-quantized", 8, "group", 16, false), tensors: act("w8g16int", "int"),
			logical: pg + "weight", expected: "w8g16int.expected_native", scheme: "int-quantized int8, groups of 16, activation order in weight_g_idx, zero points", bad: pg + "weight_g_idx"},
		gptqCase("b4v1", 4, false), gptqCase("b4v1act", 4, false), gptqCase("b3v1", 3, false), gptqCase("b2v2", 2, true), gptqCase("b8v2", 8, true),
		{name: "awq", fixture: "awq", config: `{"torch_dtype": "float16", "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": true, "version": "gemm"}}`,
			tensors: [][2]string{{aw + "qweight", "qweight"}, {aw + "qzeros", "qzeros"}, {aw + "scales", "scales"}},
			logical: aw + "weight", expected: "expected_native", scheme: "awq gemm int4, groups of 32", bad: aw + "qzeros"},
		bnbCase("nf4", "w_nf4", "nf4", "bfloat16", "nf4.expected_native", false),
		bnbCase("nf4 nested", "w_nf4nested", "nf4", "bfloat16", "nf4nested.expected_native", true),
		bnbCase("fp4 nested", "w_fp4nested", "fp4", "float16", "fp4nested.expected_native", true),
		{name: "bitsandbytes int8", fixture: "bnb", config: `{"torch_dtype": "float32", "quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": true}}`,
			tensors: [][2]string{{"model.layers.0.mlp.up_proj.weight", "int8.weight"}, {"model.layers.0.mlp.up_proj.SCB", "int8.SCB"}},
			logical: "model.layers.0.mlp.up_proj.weight", expected: "int8.expected", scheme: "LLM.int8", bad: "model.layers.0.mlp.up_proj.SCB"},
		mlxCase("b4g64", "float32", `{"group_size": 64, "bits": 4}`),
		mlxCase("b8g32", "float32", `{"group_size": 32, "bits": 8}`),
		mlxCase("b3g64", "float32", `{"group_size": 64, "bits": 4, "model.layers.0.mlp.up_proj": {"group_size": 64, "bits": 3}, "lm_head": false}`),
		mlxCase("b5g32", "float32", `{"group_size": 64, "bits": 4, "model.layers.0.mlp.up_proj": {"group_size": 32, "bits": 5}}`),
	}
}

// build writes the release; shorten names a tensor whose first dimension loses one.
func (c schemeCase) build(t *testing.T, shorten string) string {
	t.Helper()
	fx, err := statedict.Open(filepath.Join("..", "..", "quant", "testdata", c.fixture+".safetensors"), statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	dir := t.TempDir()
	var names, dts []string
	var shapes [][]int64
	var data [][]byte
	for _, p := range c.tensors {
		ft := fx.Tensor(p[1])
		if ft == nil {
			t.Fatalf("fixture %s has no %s", c.fixture, p[1])
		}
		b, err := ft.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		shape := append([]int64{}, ft.Shape...)
		if p[0] == shorten {
			if len(shape) == 0 || shape[0] < 2 {
				t.Fatalf("%s: cannot shorten %v", p[0], shape)
			}
			b = b[:int64(len(b))/shape[0]*(shape[0]-1)]
			shape[0]--
		}
		st, _ := ft.DType.Safetensors()
		if d := c.dts[p[0]]; d != "" {
			st = d
		}
		names, dts, shapes, data = append(names, p[0]), append(dts, st), append(shapes, shape), append(data, b)
	}
	// An unquantized tensor beside them passes through.
	names, dts, shapes, data = append(names, "model.norm.weight"), append(dts, "F32"), append(shapes, []int64{2}), append(data, []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40})
	writeST(t, filepath.Join(dir, "model.safetensors"), names, dts, shapes, data)
	if c.config != "" {
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// expectedBytes returns the fixture's tensor of upstream's values: its
// bytes, dtype and shape.
func (c schemeCase) expectedBytes(t *testing.T) ([]byte, dtype.DType, []int64) {
	t.Helper()
	fx, err := statedict.Open(filepath.Join("..", "..", "quant", "testdata", c.fixture+".safetensors"), statedict.WithRaw())
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	e := fx.Tensor(c.expected)
	if e == nil {
		t.Fatalf("fixture %s has no %s", c.fixture, c.expected)
	}
	b, err := e.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return b, e.DType, e.Shape
}

func (c schemeCase) want(t *testing.T) []float32 {
	b, dt, _ := c.expectedBytes(t)
	out := make([]float32, len(b)/dt.Size())
	dtype.DecodeFloat32(dt, out, b)
	return out
}

// TestQuantSchemesConvert: for every registered scheme, `ckpt convert DIR
// out.safetensors --dtype float32` of a release in the upstream layout
// gives upstream's dequantized values bit for bit under the unquantized
// model's name, the companions consumed; `ckpt inspect DIR` shows the
// scheme and the stored form; a companion of the wrong shape is refused
// with one line naming the tensor, and nothing is written.
func TestQuantSchemesConvert(t *testing.T) {
	for _, c := range schemeCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := c.build(t, "")
			out := filepath.Join(t.TempDir(), "o.safetensors")
			if code, _, errs := runCLI(t, "convert", dir, out, "--dtype", "float32"); code != exitOK {
				t.Fatalf("exit %d: %s", code, errs)
			}
			ck, err := statedict.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if len(ck.Tensors) != 2 || ck.Tensor("model.norm.weight") == nil {
				var names []string
				for _, x := range ck.Tensors {
					names = append(names, x.Name)
				}
				t.Fatalf("output tensors %v, want %s and model.norm.weight", names, c.logical)
			}
			g := ck.Tensor(c.logical)
			if g == nil || g.DType != dtype.Float32 {
				t.Fatalf("no float32 %s in the output", c.logical)
			}
			b, err := g.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			want := c.want(t)
			if int64(len(want)) != g.NumEl() {
				t.Fatalf("shape %v: %d elements, upstream %d", g.Shape, g.NumEl(), len(want))
			}
			wb := make([]byte, 4*len(want))
			dtype.EncodeFloat32(dtype.Float32, wb, want)
			if !bytes.Equal(b, wb) {
				got := make([]float32, len(want))
				dtype.DecodeFloat32(dtype.Float32, got, b)
				for i := range got {
					if got[i] != want[i] && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("element %d: %v, upstream %v", i, got[i], want[i])
					}
				}
			}

			code, stdout, errs := runCLI(t, "inspect", dir)
			if code != exitOK || !strings.Contains(stdout, c.scheme) || !strings.Contains(stdout, c.logical) {
				t.Errorf("inspect: exit %d, scheme %q missing:\n%s%s", code, c.scheme, stdout, errs)
			}

			bad := c.build(t, c.bad)
			out2 := filepath.Join(t.TempDir(), "bad.safetensors")
			code, _, errs = runCLI(t, "convert", bad, out2, "--dtype", "float32")
			if code != exitError || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "scheme ") {
				t.Fatalf("wrong-shaped %s: exit %d, %q", c.bad, code, errs)
			}
			if _, err := os.Stat(out2); err == nil {
				t.Error("output written despite the refusal")
			}
		})
	}
}

// TestQuantDirOutputConfig: a directory output of a quantized release
// gets its config.json without the quantization block and with
// torch_dtype set to the dtype written; a single-file output gets none.
func TestQuantDirOutputConfig(t *testing.T) {
	c := schemeCases()[0] // mxfp4, with config.json
	dir := c.build(t, "")
	out := t.TempDir()
	idx := filepath.Join(out, "sh", "model.safetensors.index.json")
	if code, _, errs := runCLI(t, "convert", dir, idx, "--dtype", "float16", "--max-shard-size", "1KB"); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(filepath.Join(out, "sh", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["quantization_config"]; ok || m["torch_dtype"] != "float16" {
		t.Errorf("config.json written: %s", b)
	}
	// The release's config.json, read again beside the output, now says
	// nothing is quantized: the output opens as plain tensors.
	ck, err := statedict.Open(idx)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Quantization != nil || ck.Tensor(c.logical) == nil {
		t.Errorf("output reopened: quantization %v", ck.Quantization)
	}
	// OUT a directory: one file and config.json in it.
	d := filepath.Join(out, "d")
	os.MkdirAll(d, 0o755)
	if code, _, errs := runCLI(t, "convert", dir, d); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(filepath.Join(d, "config.json")); err != nil || !strings.Contains(string(b), `"torch_dtype": "bfloat16"`) || strings.Contains(string(b), "quantization") {
		t.Errorf("directory output's config.json: %s %v", b, err)
	}
	single := filepath.Join(out, "one", "o.safetensors")
	os.MkdirAll(filepath.Dir(single), 0o755)
	if code, _, errs := runCLI(t, "convert", dir, single); code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(out, "one", "config.json")); err == nil {
		t.Error("a single-file output got a config.json")
	}
}

// TestQuantScaleDTypesNotCast: safetensors F8_E8M0, F4 and F6 tensors that no
// scheme consumes are refused under --dtype (one line naming the tensor,
// nothing written) and kept as stored without it; consumed by MXFP4 (an
// F8_E8M0 _scales) they read as the scheme's values.
func TestQuantScaleDTypesNotCast(t *testing.T) {
	dir := t.TempDir()
	names, codes := []string{"a.exp", "b.codes", "c.f6", "d.f6"}, []string{"F8_E8M0", "F4", "F6_E2M3", "F6_E3M2"}
	in := filepath.Join(dir, "model.safetensors")
	writeST(t, in, names, codes, [][]int64{{2}, {2, 4}, {2, 4}, {4}},
		[][]byte{{127, 128}, {0x21, 0x43, 0x65, 0x07}, {1, 2, 3, 4, 5, 6}, {7, 8, 9}})
	out := filepath.Join(t.TempDir(), "o.safetensors")
	for _, only := range names {
		code, _, errs := runCLI(t, "convert", dir, out, "--dtype", "bf16", "--only", only)
		if code != exitError || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, only) {
			t.Fatalf("--dtype bf16 of %s: exit %d: %q", only, code, errs)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatal("output written")
		}
	}
	// Without --dtype: written as stored, header and bytes the same.
	if code, _, errs := runCLI(t, "convert", dir, out); code != exitOK {
		t.Fatalf("without --dtype: exit %d %s", code, errs)
	}
	ib, _ := os.ReadFile(in)
	ob, _ := os.ReadFile(out)
	back, err := statedict.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	for i, want := range [][]byte{{127, 128}, {0x21, 0x43, 0x65, 0x07}, {1, 2, 3, 4, 5, 6}, {7, 8, 9}} {
		if got, err := back.Tensor(names[i]).ReadAll(); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s written as % x (%v)", names[i], got, err)
		}
	}
	for i, n := range names {
		for _, b := range [][]byte{ib, ob} {
			if !regexp.MustCompile(`"` + regexp.QuoteMeta(n) + `":\{[^}]*"dtype":"` + codes[i] + `"`).Match(b) {
				t.Errorf("%s not %s in %.300s", n, codes[i], b)
			}
		}
	}
	code, stdout, _ := runCLI(t, "inspect", dir)
	for _, w := range []string{"float8_e8m0fnu", "float4_e2m1fn_x2", "float6_e2m3fn_x4  [2, 1]", "float6_e3m2fn_x4  [1]"} {
		if code != exitOK || !strings.Contains(stdout, w) {
			t.Errorf("inspect lacks %q:\n%s", w, stdout)
		}
	}

	// gpt-oss's scales as F8_E8M0: the same values as U8.
	c := schemeCases()[0]
	c.dts = map[string]string{c.tensors[1][0]: "F8_E8M0"}
	out = filepath.Join(t.TempDir(), "m.safetensors")
	if code, _, errs := runCLI(t, "convert", c.build(t, ""), out, "--dtype", "float32"); code != exitOK {
		t.Fatalf("mxfp4 with F8_E8M0 scales: exit %d %s", code, errs)
	}
}

// expectedFile writes upstream's values of c's weight under its logical
// name, in the logical dtype, beside the pass-through tensor; flip
// changes one bit of the first element.
func (c schemeCase) expectedFile(t *testing.T, flip bool) string {
	b, dt, shape := c.expectedBytes(t)
	if flip {
		b[0] ^= 1
	}
	// Upstream's bfloat16 NaNs come out of bfloat16 arithmetic (0xffff
	// from transformers' mxfp4 for 0 * Inf); ckpt rounds float32 to
	// bfloat16 as torch's .to(bfloat16) does, whose NaN is 0x7fc0. Only
	// the NaN's bits differ: they are made torch's canonical ones here.
	if dt == dtype.BFloat16 || dt == dtype.Float16 {
		for i := 0; i+1 < len(b); i += 2 {
			x := uint16(b[i]) | uint16(b[i+1])<<8
			switch {
			case dt == dtype.BFloat16 && x&0x7fff > 0x7f80:
				b[i], b[i+1] = 0xc0, 0x7f
			case dt == dtype.Float16 && x&0x7fff > 0x7c00:
				b[i], b[i+1] = 0x00, 0x7e
			}
		}
	}
	st, _ := dt.Safetensors()
	p := filepath.Join(t.TempDir(), "expected.safetensors")
	writeST(t, p, []string{c.logical, "model.norm.weight"}, []string{st, "F32"}, [][]int64{shape, {2}}, [][]byte{b, {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40}})
	return p
}

// TestQuantLoadVerify: ckpt verify and ckpt load of a quantized release
// see the dequantized weight: verify finds it equal, bit for bit, to
// upstream's values (and unequal when one bit of them differs), and the
// digest load computes of it is the digest of upstream's values.
func TestQuantLoadVerify(t *testing.T) {
	digest := func(t *testing.T, path, name string) string {
		code, stdout, errs := runCLI(t, "load", "--json", path)
		if code != exitOK {
			t.Fatalf("load %s: exit %d %s", path, code, errs)
		}
		var r struct {
			Loaded struct {
				Storages []struct {
					Digest  string   `json:"digest"`
					Tensors []string `json:"tensors"`
				} `json:"storages"`
			} `json:"loaded"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Loaded.Storages {
			if len(s.Tensors) == 1 && s.Tensors[0] == name {
				return s.Digest
			}
		}
		t.Fatalf("load %s: no storage of %s in %s", path, name, stdout)
		return ""
	}
	for _, c := range schemeCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := c.build(t, "")
			if code, out, errs := runCLI(t, "verify", dir, c.expectedFile(t, false)); code != exitOK {
				t.Errorf("verify against upstream: exit %d\n%s%s", code, out, errs)
			}
			if code, _, _ := runCLI(t, "verify", dir, c.expectedFile(t, true)); code != exitError {
				t.Errorf("verify against a changed value: exit %d", code)
			}
			if got, want := digest(t, dir, c.logical), digest(t, c.expectedFile(t, false), c.logical); got != want {
				t.Errorf("load digest %s, upstream's values %s", got, want)
			}
		})
	}
}
