package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

// rawTensor is one tensor of a safetensors file the tests write byte for
// byte, as an upstream tool saved it.
type rawTensor struct {
	name, dtype string
	shape       []int64
	data        []byte
}

// writeRelease writes model.safetensors and config.json into dir and
// returns the safetensors path.
func writeRelease(t *testing.T, dir, config string, ts []rawTensor) string {
	t.Helper()
	hdr := map[string]any{}
	var body []byte
	for _, x := range ts {
		hdr[x.name] = map[string]any{"dtype": x.dtype, "shape": x.shape, "data_offsets": []int{len(body), len(body) + len(x.data)}}
		body = append(body, x.data...)
	}
	h, _ := json.Marshal(hdr)
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint64(len(h)))
	b.Write(h)
	b.Write(body)
	p := filepath.Join(dir, "model.safetensors")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ggufOf converts the release at p to GGUF with opts and returns the
// summary and the written file (parsed, and its bytes).
func ggufOf(t *testing.T, p string, opts ...Option) (*Summary, *gguf.File, []byte, error) {
	t.Helper()
	ck, err := statedict.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := filepath.Join(t.TempDir(), "out.gguf")
	sum, err := Convert(context.Background(), ck, out, append([]Option{WithFormat(GGUF),
		WithGGUFMetadata(gguf.KV{Key: "general.architecture", Type: gguf.TypeString, Value: "x"})}, opts...)...)
	if err != nil {
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("%v, yet %s was written", err, out)
		}
		return nil, nil, nil, err
	}
	f, b := readGGUFFile(t, out)
	return sum, f, b, nil
}

func ggufInfo(t *testing.T, f *gguf.File, name string) gguf.TensorInfo {
	t.Helper()
	for _, ti := range f.Tensors {
		if ti.Name == name {
			return ti
		}
	}
	t.Fatalf("no tensor %s in the GGUF", name)
	return gguf.TensorInfo{}
}

// e4m3 decodes a float8 e4m3fn byte (bias 7, no infinities, S.1111.111
// NaN), written out from the format's definition.
func e4m3(b byte) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	e, m := int(b>>3&0xf), float64(b&7)
	if e == 0 {
		return sign * float32(math.Ldexp(m/8, -6))
	}
	return sign * float32(math.Ldexp(1+m/8, e-7))
}

// bf16RNE rounds a float32 to bfloat16 (to nearest, ties to even),
// returned widened to float32; the values here are finite.
func bf16RNE(f float32) float32 {
	u := math.Float32bits(f)
	u += 0x7fff + (u >> 16 & 1)
	return math.Float32frombits(u &^ 0xffff)
}

func bf16Bytes(v []float32) []byte {
	b := make([]byte, 0, 2*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(f)>>16))
	}
	return b
}

// fp8Codes returns n random e4m3fn codes, NaN excluded.
func fp8Codes(r *rand.Rand, n int) []byte {
	c := make([]byte, n)
	for i := range c {
		for c[i] = byte(r.Intn(256)); c[i]&0x7f == 0x7f; c[i] = byte(r.Intn(256)) {
		}
	}
	return c
}

// TestGGUFFromFP8: a DeepSeek-style block-FP8 release (40x96 codes in
// 16x32 blocks, ragged in rows; weight_scale_inv beside) and an
// llm-compressor channel-FP8 one (bfloat16 scales) become GGUF Q8_0 and
// BF16 tensors under the unquantized names, the scales consumed: BF16
// holds the dequantized values (DeepSeek's weight_dequant product, and
// compressed-tensors' product in the scale's dtype, both rounded to
// bfloat16 as upstream stores them, computed here from the codes), and
// Q8_0 is ggml's quantizer run on exactly those values.
func TestGGUFFromFP8(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	const rows, cols, ctCols = 40, 96, 64
	codes := fp8Codes(r, rows*cols)
	// Block scales as transformers' act_quant gives them (amax/448):
	// powers of two times a random mantissa.
	sinv := make([]float32, 3*3)
	for i := range sinv {
		sinv[i] = float32(math.Ldexp(1+r.Float64(), -r.Intn(12)))
	}
	deepseek := make([]float32, rows*cols)
	for i := range deepseek {
		rr, cc := i/cols, i%cols
		deepseek[i] = bf16RNE(e4m3(codes[i]) * sinv[(rr/16)*3+cc/32])
	}
	ctCodes := fp8Codes(r, rows*ctCols)
	ctScale := make([]float32, rows)
	for i := range ctScale {
		ctScale[i] = bf16RNE(float32(r.Float64() * 0.01))
	}
	channel := make([]float32, rows*ctCols)
	for i := range channel {
		channel[i] = bf16RNE(e4m3(ctCodes[i]) * ctScale[i/ctCols])
	}
	norm := make([]float32, cols)
	for i := range norm {
		norm[i] = bf16RNE(float32(r.NormFloat64()))
	}
	cases := []struct {
		name, config string
		tensors      []rawTensor
		weight       string
		want         []float32
		consumed     []string
	}{
		{"deepseek block fp8", `{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [16, 32]}}`,
			[]rawTensor{{"model.layers.0.mlp.up_proj.weight", "F8_E4M3", []int64{rows, cols}, codes},
				{"model.layers.0.mlp.up_proj.weight_scale_inv", "F32", []int64{3, 3}, f32le(sinv)},
				{"model.norm.weight", "BF16", []int64{cols}, bf16Bytes(norm)}},
			"model.layers.0.mlp.up_proj.weight", deepseek, []string{"model.layers.0.mlp.up_proj.weight_scale_inv"}},
		{"compressed-tensors channel fp8", `{"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
 "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true}}}, "ignore": ["lm_head"]}}`,
			[]rawTensor{{"model.layers.0.mlp.down_proj.weight", "F8_E4M3", []int64{rows, ctCols}, ctCodes},
				{"model.layers.0.mlp.down_proj.weight_scale", "BF16", []int64{rows, 1}, bf16Bytes(ctScale)},
				{"model.layers.0.mlp.down_proj.input_scale", "F32", []int64{1}, f32le([]float32{0.5})},
				{"model.norm.weight", "BF16", []int64{cols}, bf16Bytes(norm)}},
			"model.layers.0.mlp.down_proj.weight", channel, []string{"model.layers.0.mlp.down_proj.weight_scale", "model.layers.0.mlp.down_proj.input_scale"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeRelease(t, t.TempDir(), c.config, c.tensors)
			for _, typ := range []ggml.Type{ggml.Q8_0, ggml.BF16} {
				sum, f, b, err := ggufOf(t, p, WithGGUFType(typ.String()))
				if err != nil {
					t.Fatal(err)
				}
				if len(f.Tensors) != 2 {
					t.Errorf("%s: %d tensors, want the weight and the norm", typ, len(f.Tensors))
				}
				for _, ti := range f.Tensors {
					if slices.Contains(c.consumed, ti.Name) || strings.Contains(ti.Name, "scale") {
						t.Errorf("%s: companion %s written", typ, ti.Name)
					}
				}
				ti := ggufInfo(t, f, c.weight)
				if ti.Type != typ || !slices.Equal(ti.Dims, []uint64{uint64(len(c.want) / rows), rows}) {
					t.Errorf("%s: %s is %s %v", typ, c.weight, ti.Type, ti.Dims)
				}
				want := bf16Bytes(c.want)
				if typ == ggml.Q8_0 {
					n, _ := typ.RowBytes(int64(len(c.want)))
					want = make([]byte, n)
					if err := ggml.Quantize(typ, c.want, want); err != nil {
						t.Fatal(err)
					}
				}
				if !bytes.Equal(ggufData(f, b, c.weight), want) {
					t.Errorf("%s: %s's data is not the dequantized values as %s", typ, c.weight, typ)
				}
				// The 1-D norm (BF16 in the release) stays F32 under either
				// type, and the summary says so.
				ni := ggufInfo(t, f, "model.norm.weight")
				wantNorm := []GGUFFallback{{Tensors: 1, Type: "f32", Reason: "1-D tensors stay F32 (llama.cpp's rule)", First: "model.norm.weight"}}
				if ni.Type != ggml.F32 || sum.GGUFTypes == nil || !slices.Equal(sum.GGUFTypes.Fallbacks, wantNorm) ||
					sum.GGUFTypes.Written[typ.String()] != 1 || sum.GGUFTypes.Requested != typ.String() {
					t.Errorf("%s: norm %s, report %+v", typ, ni.Type, sum.GGUFTypes)
				}
			}
		})
	}
}

// fp4Value is E2M1's value of a 4-bit code (sign in bit 3), from the
// format's definition: exponent bits 2-1 (bias 1), mantissa bit 0.
func fp4Value(c byte) float64 {
	e, m := int(c>>1&3), float64(c&1)
	v := math.Ldexp(1+m/2, e-1)
	if e == 0 {
		v = m / 2
	}
	if c&8 != 0 {
		v = -v
	}
	return v
}

// mxfp4Expected decodes gpt-oss blocks [.., G, 16] and scales [.., G] in
// the stored orientation: element 2j of a group in the low nibble of byte
// j, 2j+1 in the high one, times 2^(scale-127) (in float64, exact, then
// rounded to float32 as torch.ldexp's float32 result is). For the
// exponent 255, torch.ldexp multiplies by pow(2, 128) in float32, +Inf:
// a zero code gives NaN, any other an infinity.
func mxfp4Expected(blocks, scales []byte) []float32 {
	out := make([]float32, 32*len(scales))
	val := func(c, s byte) float32 {
		if s == 255 {
			return float32(fp4Value(c)) * float32(math.Inf(1))
		}
		return float32(math.Ldexp(fp4Value(c), int(s)-127))
	}
	for g, s := range scales {
		for j := 0; j < 16; j++ {
			b := blocks[16*g+j]
			out[32*g+2*j] = val(b&15, s)
			out[32*g+2*j+1] = val(b>>4, s)
		}
	}
	return out
}

// mxfp4Differs returns the first index where ggml's MXFP4 value got
// differs from want in its bits, -1 for none. The one difference
// allowed: ggml's kvalues_mxfp4 is an int8 table, so code 8 (E2M1's -0)
// reads as +0 where transformers' float table gives -0.
func mxfp4Differs(got, want []float32) int {
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(want[i] == 0 && got[i] == 0) {
			return i
		}
	}
	return -1
}

// llamaCppRepack is llama.cpp's convert_hf_to_gguf.py GptOssModel
// transform_nibble_layout and repack_mxfp4, step by step as the torch
// code does them, over one group: swap nibbles; split into a (bytes 0-7)
// and b (8-15); a0 = a & 0xF0, a1 = a << 4 interleaved; b0 = b >> 4,
// b1 = b & 0x0F interleaved; a | b; swap nibbles again; the scale byte
// in front.
func llamaCppRepack(blk []byte, scale byte) []byte {
	var t [16]byte
	for i, x := range blk {
		t[i] = x&0x0f<<4 | x&0xf0>>4
	}
	var a, b [16]byte
	for j := 0; j < 8; j++ {
		a[2*j], a[2*j+1] = t[j]&0xf0, t[j]<<4
		b[2*j], b[2*j+1] = t[8+j]>>4, t[8+j]&0x0f
	}
	out := []byte{scale}
	for i := range a {
		o := a[i] | b[i]
		out = append(out, o&0xf0>>4|o&0x0f<<4)
	}
	return out
}

// mxfp4Release is a gpt-oss-like release: two expert tensors in MXFP4
// (the exponents of every group random, with 0, 1 and 254 among them;
// 255 too when bad), two dense weights (one with rows of 48) and a norm.
type mxfp4Release struct {
	path    string
	experts map[string][]int64 // stored shape [E, R, G*32]
	blocks  map[string][]byte
	scales  map[string][]byte
	dense   map[string][]float32
}

func newMXFP4Release(t *testing.T, bad bool) *mxfp4Release {
	r := rand.New(rand.NewSource(39))
	m := &mxfp4Release{experts: map[string][]int64{}, blocks: map[string][]byte{}, scales: map[string][]byte{}, dense: map[string][]float32{}}
	var ts []rawTensor
	for _, e := range []struct {
		name    string
		e, r, g int64
	}{{"model.layers.0.mlp.experts.gate_up_proj", 2, 6, 3}, {"model.layers.0.mlp.experts.down_proj", 2, 4, 2}} {
		n := e.e * e.r * e.g
		blk := make([]byte, 16*n)
		r.Read(blk)
		sc := make([]byte, n)
		for i := range sc {
			sc[i] = byte(110 + r.Intn(30))
		}
		sc[0], sc[1], sc[2] = 0, 1, 254
		if bad {
			sc[n-1] = 255
		}
		m.experts[e.name] = []int64{e.e, e.r, 32 * e.g}
		m.blocks[e.name], m.scales[e.name] = blk, sc
		ts = append(ts, rawTensor{e.name + "_blocks", "U8", []int64{e.e, e.r, e.g, 16}, blk}, rawTensor{e.name + "_scales", "U8", []int64{e.e, e.r, e.g}, sc})
	}
	for name, shape := range map[string][]int64{"model.layers.0.self_attn.q_proj.weight": {8, 64}, "model.layers.0.self_attn.o_proj.weight": {4, 48}, "model.layers.0.input_layernorm.weight": {64}} {
		n := int64(1)
		for _, s := range shape {
			n *= s
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		m.dense[name] = v
		ts = append(ts, rawTensor{name, "F32", shape, f32le(v)})
	}
	slices.SortFunc(ts, func(a, b rawTensor) int { return strings.Compare(a.name, b.name) })
	m.path = writeRelease(t, t.TempDir(), `{"torch_dtype": "float32", "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["model.layers.*.self_attn"]}}`, ts)
	return m
}

// TestGGUFMXFP4Copy: gpt-oss's MXFP4 experts go into GGUF's MXFP4 type
// block for block, in the stored orientation [E, R, G*32] (ggml dims
// {G*32, R, E}): the bytes are those llama.cpp's repack gives, ggml's
// MXFP4 dequantization of them is the format's values of the source bit
// for bit (exponents 0, 1 and 254 included), and ggml's validation
// passes. Under --gguf-type q8_0 the experts stay MXFP4 and the report
// says so beside the other fallbacks; under f32 and bf16 the values are
// written in the same orientation; --gguf-type mxfp4 quantizes the dense
// weights with ggml's MXFP4 quantizer.
func TestGGUFMXFP4Copy(t *testing.T) {
	m := newMXFP4Release(t, false)
	for _, typ := range []string{"", "q8_0", "mxfp4", "f32", "bf16"} {
		t.Run("type="+typ, func(t *testing.T) {
			var opts []Option
			if typ != "" {
				opts = append(opts, WithGGUFType(typ))
			}
			sum, f, b, err := ggufOf(t, m.path, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for name, shape := range m.experts {
				ti := ggufInfo(t, f, name)
				if !slices.Equal(ti.Dims, []uint64{uint64(shape[2]), uint64(shape[1]), uint64(shape[0])}) {
					t.Errorf("%s: dims %v, want the stored orientation %v reversed", name, ti.Dims, shape)
				}
				data := ggufData(f, b, name)
				want := mxfp4Expected(m.blocks[name], m.scales[name])
				switch typ {
				case "", "q8_0", "mxfp4":
					if ti.Type != ggml.MXFP4 {
						t.Fatalf("%s: type %s, want mxfp4", name, ti.Type)
					}
					var repacked []byte
					for g, s := range m.scales[name] {
						repacked = append(repacked, llamaCppRepack(m.blocks[name][16*g:16*g+16], s)...)
					}
					if !bytes.Equal(data, repacked) {
						t.Errorf("%s: blocks differ from llama.cpp's repack", name)
					}
					got := make([]float32, len(want))
					if err := ggml.Dequantize(ggml.MXFP4, data, got); err != nil {
						t.Fatal(err)
					}
					if i := mxfp4Differs(got, want); i >= 0 {
						t.Errorf("%s: ggml's dequantization differs from the MXFP4 values at %d: %g, want %g", name, i, got[i], want[i])
					}
					if err := ggml.Validate(ggml.MXFP4, data); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				case "f32":
					if ti.Type != ggml.F32 || !bytes.Equal(data, f32le(want)) {
						t.Errorf("%s: %s, values differ", name, ti.Type)
					}
				case "bf16":
					for i := range want {
						if want[i] != bf16RNE(want[i]) {
							t.Fatalf("%s: value %g is not a bfloat16", name, want[i])
						}
					}
					if ti.Type != ggml.BF16 || !bytes.Equal(data, bf16Bytes(want)) {
						t.Errorf("%s: %s, values differ", name, ti.Type)
					}
				}
			}
			rep := sum.GGUFTypes
			wantCopied := map[string]int{"": 2, "q8_0": 2, "mxfp4": 2}[typ]
			if rep == nil || rep.MXFP4Copied != wantCopied {
				t.Fatalf("report %+v, want %d MXFP4 tensors copied", rep, wantCopied)
			}
			q := ggufInfo(t, f, "model.layers.0.self_attn.q_proj.weight")
			o := ggufInfo(t, f, "model.layers.0.self_attn.o_proj.weight")
			var want []GGUFFallback
			switch typ {
			case "":
				if q.Type != ggml.F32 || len(rep.Fallbacks) != 0 || rep.Requested != "" || rep.Written["mxfp4"] != 2 || rep.Written["f32"] != 3 {
					t.Errorf("no type: q_proj %s, report %+v", q.Type, rep)
				}
			case "q8_0", "mxfp4":
				tq, _ := ggml.ParseType(typ)
				n, _ := tq.RowBytes(8 * 64)
				wq := make([]byte, n)
				if err := ggml.Quantize(tq, m.dense["model.layers.0.self_attn.q_proj.weight"], wq); err != nil {
					t.Fatal(err)
				}
				if q.Type != tq || !bytes.Equal(ggufData(f, b, q.Name), wq) || o.Type != ggml.F16 {
					t.Errorf("%s: q_proj %s (or its data differs), o_proj %s", typ, q.Type, o.Type)
				}
				if typ == "q8_0" {
					want = append(want, GGUFFallback{2, "mxfp4", "MXFP4 blocks copied as stored, as llama.cpp's converter keeps them", "model.layers.0.mlp.experts.down_proj"})
				}
				want = append(want, GGUFFallback{1, "f32", "1-D tensors stay F32 (llama.cpp's rule)", "model.layers.0.input_layernorm.weight"},
					GGUFFallback{1, "f16", "rows of 48 not a multiple of " + tq.String() + "'s 32", o.Name})
			case "bf16":
				want = append(want, GGUFFallback{1, "f32", "1-D tensors stay F32 (llama.cpp's rule)", "model.layers.0.input_layernorm.weight"})
			}
			if typ != "" {
				if !slices.Equal(rep.Fallbacks, want) {
					t.Errorf("%s: fallbacks\n %+v\nwant\n %+v", typ, rep.Fallbacks, want)
				}
			}
		})
	}
}

// TestGGUFMXFP4DType: --dtype bfloat16 without --gguf-type asks for the
// values: the experts are written as BF16, in the stored orientation.
func TestGGUFMXFP4DType(t *testing.T) {
	m := newMXFP4Release(t, false)
	sum, f, b, err := ggufOf(t, m.path, WithDType(dtype.BFloat16))
	if err != nil {
		t.Fatal(err)
	}
	for name := range m.experts {
		if ti := ggufInfo(t, f, name); ti.Type != ggml.BF16 || !bytes.Equal(ggufData(f, b, name), bf16Bytes(mxfp4Expected(m.blocks[name], m.scales[name]))) {
			t.Errorf("%s: %s, or values differ", name, ti.Type)
		}
	}
	if sum.GGUFTypes.MXFP4Copied != 0 {
		t.Errorf("report %+v", sum.GGUFTypes)
	}
}

// TestGGUFMXFP4NaNExponent: an exponent byte of 255 (E8M0's NaN) is
// refused for a copy with one error naming the scales tensor, nothing
// written; --gguf-type f32 writes the values ckpt reads (Inf/NaN there).
func TestGGUFMXFP4NaNExponent(t *testing.T) {
	m := newMXFP4Release(t, true)
	_, _, _, err := ggufOf(t, m.path)
	var te *TensorError
	if err == nil || !errors.As(err, &te) || !strings.Contains(err.Error(), "_scales: exponent 0xff") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	if _, f, b, err := ggufOf(t, m.path, WithGGUFType("f32")); err != nil {
		t.Fatal(err)
	} else {
		name := "model.layers.0.mlp.experts.down_proj"
		if !bytes.Equal(ggufData(f, b, name), f32le(mxfp4Expected(m.blocks[name], m.scales[name]))) {
			t.Errorf("f32 values differ")
		}
	}
}
