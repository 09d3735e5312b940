package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// memRows serves a row-major matrix as a RowReader.
func memRows(m []float32, cols int64) RowReader {
	return func(dst []float32, r0, r1 int64) error {
		copy(dst, m[r0*cols:r1*cols])
		return nil
	}
}

// runQuantizer quantizes m whole and returns each output's bytes.
func runQuantizer(t testing.TB, q WeightQuantizer, m []float32) [][]byte {
	t.Helper()
	read := memRows(m, q.Cols())
	if err := q.Prepare(read); err != nil {
		t.Fatal(err)
	}
	_, n := q.CodeSpan(0, q.Rows())
	codes := make([]byte, n)
	if err := QuantizeRows(q, read, codes, 0, q.Rows()); err != nil {
		t.Fatal(err)
	}
	out := [][]byte{codes}
	for i := 1; i < len(q.Outputs()); i++ {
		out = append(out, q.Companion(i))
	}
	return out
}

func randMatrix(n int, seed int64, dt dtype.DType) []float32 {
	r := rand.New(rand.NewSource(seed))
	m := make([]float32, n)
	for i := range m {
		m[i] = roundTo(dt, float32(r.NormFloat64()*math.Pow(2, float64(r.Intn(12)-6))))
	}
	return m
}

func TestE4M3FromF32(t *testing.T) {
	// Every finite code decodes to a value that encodes back to it.
	for b := 0; b < 256; b++ {
		v := dtype.Float8ToFloat64(dtype.Float8E4M3FN, byte(b))
		if math.IsNaN(v) {
			continue
		}
		if got := e4m3FromF32(float32(v)); got != byte(b) && !(v == 0 && got&0x7f == 0) {
			t.Errorf("code %#x (%v) encodes to %#x", b, v, got)
		}
	}
	// Ties go to the even code; 464 (between 448 and the NaN code) to 448.
	for _, c := range []struct {
		f    float32
		want byte
	}{{1.0625, 0x38}, {1.1875, 0x3a}, {464, 0x7e}, {470, 0x7f}, {-480, 0xff}, {float32(math.Inf(1)), 0x7f}, {1.0 / 1024, 0x00}, {3.0 / 1024, 0x02}} {
		if got := e4m3FromF32(c.f); got != c.want {
			t.Errorf("e4m3(%v) = %#x, want %#x", c.f, got, c.want)
		}
	}
}

// TestQuantizeFP8BlockRoundTrip: the codes and scales read back through
// fp8.go's reader (Detect with the config block) give values within half
// an e4m3 step of the input, and the reader's value of each code is the
// nearest e4m3 value to x*scale.
func TestQuantizeFP8BlockRoundTrip(t *testing.T) {
	const rows, cols = 256, 384
	m := randMatrix(rows*cols, 1, dtype.BFloat16)
	m[5] = 0 // a block with exact zeros still works
	spec, err := ParseQuantize("fp8-block:128x128")
	if err != nil {
		t.Fatal(err)
	}
	q, skip := NewQuantizer(spec, "l.weight", dtype.BFloat16, []int64{rows, cols}, nil)
	if skip != "" {
		t.Fatal(skip)
	}
	out := runQuantizer(t, q, m)
	plan, err := Detect([]byte(`{"quantization_config":{"quant_method":"fp8","fmt":"e4m3","weight_block_size":[128,128]}}`), q.Outputs())
	if err != nil {
		t.Fatal(err)
	}
	g := plan.Groups[0]
	got := make([]float32, rows*cols)
	if err := g.Codec.Dequantize(got, 0, out[0], out[1:]); err != nil {
		t.Fatal(err)
	}
	inv := out[1]
	var amax [2][3]float32
	for i, x := range m {
		a := &amax[i/cols/128][i%cols/128]
		*a = max(*a, float32(math.Abs(float64(x))))
	}
	for i, x := range m {
		r, c := i/cols, i%cols
		s := math.Float32frombits(binary.LittleEndian.Uint32(inv[4*((r/128)*3+c/128):]))
		scale := (1 / amax[r/128][c/128]) * 448
		if s != 1/scale {
			t.Fatalf("block (%d, %d): scale_inv %v, want 1/(448/amax) = %v", r/128, c/128, s, 1/scale)
		}
		want := float32(dtype.Float8ToFloat64(dtype.Float8E4M3FN, nearestE4M3(x*scale))) * s
		if got[i] != want {
			t.Fatalf("element %d: %v -> %v, want %v (scale_inv %v)", i, x, got[i], want, s)
		}
	}
}

// nearestE4M3 finds by search the e4m3 code nearest to v (ties: even code).
func nearestE4M3(v float32) byte {
	best, bd := byte(0), math.Inf(1)
	for b := 0; b < 256; b++ {
		f := dtype.Float8ToFloat64(dtype.Float8E4M3FN, byte(b))
		if math.IsNaN(f) {
			continue
		}
		d := math.Abs(f - float64(v))
		if d < bd || d == bd && b&1 == 0 && (f < 0) == (v < 0) {
			best, bd = byte(b), d
		}
	}
	return best
}

func TestQuantizeFP8ChannelRoundTrip(t *testing.T) {
	const rows, cols = 33, 70
	m := randMatrix(rows*cols, 2, dtype.BFloat16)
	q, skip := NewQuantizer(QuantizeSpec{Scheme: SchemeFP8Channel}, "model.l.weight", dtype.BFloat16, []int64{rows, cols}, nil)
	if skip != "" {
		t.Fatal(skip)
	}
	out := runQuantizer(t, q, m)
	cfg := `{"quantization_config":{"quant_method":"compressed-tensors","format":"float-quantized","config_groups":{"group_0":{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"channel","symmetric":true}}}}}`
	plan, err := Detect([]byte(cfg), q.Outputs())
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows*cols)
	if err := plan.Groups[0].Codec.Dequantize(got, 0, out[0], out[1:]); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < rows; r++ {
		row := m[r*cols : (r+1)*cols]
		s := dtype.BF16ToF32(binary.LittleEndian.Uint16(out[1][2*r:]))
		if want := roundTo(dtype.BFloat16, absMax(row)/448); s != want {
			t.Fatalf("row %d scale %v, want %v", r, s, want)
		}
		for c, x := range row {
			rel := math.Abs(float64(got[r*cols+c]-x)) / float64(s)
			if rel > 17 { // half a step at the top of e4m3's range (32), plus bf16's rounding of x/scale (at most 1)
				t.Fatalf("row %d col %d: %v -> %v (scale %v)", r, c, x, got[r*cols+c], s)
			}
		}
	}
}

func TestQuantizeNVFP4RoundTrip(t *testing.T) {
	const rows, cols = 9, 64
	m := randMatrix(rows*cols, 3, dtype.BFloat16)
	for i := 16; i < 32; i++ {
		m[i] = 0 // a zero group: scale 0.125
	}
	q, skip := NewQuantizer(QuantizeSpec{Scheme: SchemeNVFP4}, "a.b.weight", dtype.BFloat16, []int64{rows, cols}, nil)
	if skip != "" {
		t.Fatal(skip)
	}
	out := runQuantizer(t, q, m)
	o := q.Outputs()
	if o[0].Name != "a.b.weight_packed" || o[1].Name != "a.b.weight_scale" || o[2].Name != "a.b.weight_global_scale" {
		t.Fatalf("outputs %+v", o)
	}
	if out[1][1] != e4m3Eighth {
		t.Fatalf("zero group scale %#x, want 0.125", out[1][1])
	}
	l, err := CheckNVFP4(ct(o[0]), ct(o[1]), ct(o[2]))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows*cols)
	if err := l.DequantRows(got, out[0], out[1], out[2], 0, rows); err != nil {
		t.Fatal(err)
	}
	gs := math.Float32frombits(binary.LittleEndian.Uint32(out[2]))
	for i, x := range m {
		s := e4m3Table[out[1][i/16]] / gs
		// the decoded value is the FP4 grid point nearest x/s, times s.
		want := nearestFP4(x/s) * s
		if got[i] != want {
			t.Fatalf("element %d: %v -> %v, want %v", i, x, got[i], want)
		}
	}
}

func nearestFP4(v float32) float32 {
	best, bd := float32(0), math.Inf(1)
	for c, f := range fp4E2M1 {
		d := math.Abs(float64(f - v))
		if d < bd || d == bd && c&1 == 0 {
			best, bd = f, d
		}
	}
	return best
}

func ct(s Stored) CodecTensor { return CodecTensor{Name: s.Name, DType: s.DType, Shape: s.Shape} }

func TestQuantizeMXFP4RoundTrip(t *testing.T) {
	const e, k, n = 2, 64, 6
	m := randMatrix(e*k*n, 4, dtype.BFloat16)
	q, skip := NewQuantizer(QuantizeSpec{Scheme: SchemeMXFP4}, "model.layers.0.mlp.experts.gate_up_proj", dtype.BFloat16, []int64{e, k, n}, nil)
	if skip != "" {
		t.Fatal(skip)
	}
	out := runQuantizer(t, q, m)
	o := q.Outputs()
	l, err := CheckMXFP4(ct(o[0]), ct(o[1]))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, e*k*n)
	if err := l.DequantTransposedRows(got, out[0], out[1], 0, e*k); err != nil {
		t.Fatal(err)
	}
	for i, x := range m {
		ex, kk, j := i/(k*n), i/n%k, i%n
		s := mxfp4Scales[out[1][(ex*n+j)*(k/32)+kk/32]]
		// codes round half away from zero on the E2M1 grid: within half a step.
		if d := math.Abs(float64(got[i] - x)); d > float64(s)*1.0001 {
			t.Fatalf("element %d: %v -> %v (scale %v)", i, x, got[i], s)
		}
		if math.Abs(float64(x)) > 6*float64(s) {
			t.Fatalf("element %d: %v beyond 6 * scale %v", i, x, s)
		}
	}
}

func TestQuantizeSkips(t *testing.T) {
	fp8 := QuantizeSpec{Scheme: SchemeFP8Block, Block: [2]int64{128, 128}}
	for _, c := range []struct {
		spec  QuantizeSpec
		name  string
		shape []int64
		dt    dtype.DType
	}{
		{fp8, "model.norm.weight", []int64{128, 128}, dtype.BFloat16},
		{fp8, "model.embed_tokens.weight", []int64{128, 128}, dtype.BFloat16},
		{fp8, "lm_head.weight", []int64{128, 128}, dtype.BFloat16},
		{fp8, "model.layers.0.mlp.gate.weight", []int64{128, 128}, dtype.BFloat16},
		{fp8, "model.layers.0.q_proj.bias", []int64{128}, dtype.BFloat16},
		{fp8, "model.layers.0.q_proj.weight", []int64{100, 128}, dtype.BFloat16},
		{fp8, "model.layers.0.q_proj.weight", []int64{128, 128}, dtype.Int64},
		{QuantizeSpec{Scheme: SchemeNVFP4}, "x.weight", []int64{4, 24}, dtype.BFloat16},
		{QuantizeSpec{Scheme: SchemeMXFP4}, "model.layers.0.self_attn.q_proj.weight", []int64{64, 64}, dtype.BFloat16},
		{QuantizeSpec{Scheme: SchemeMXFP4}, "model.layers.0.mlp.experts.down_proj", []int64{2, 48, 64}, dtype.BFloat16},
	} {
		if _, skip := NewQuantizer(c.spec, c.name, c.dt, c.shape, nil); skip == "" {
			t.Errorf("%s %v %s under %s: quantized, want skipped", c.name, c.shape, c.dt, c.spec.Scheme)
		}
	}
	if _, skip := NewQuantizer(fp8, "model.layers.0.q_proj.weight", dtype.BFloat16, []int64{128, 128}, []string{"model.layers.0.*"}); skip == "" {
		t.Error("--ignore glob not applied")
	}
	if _, skip := NewQuantizer(fp8, "model.layers.0.q_proj.weight", dtype.BFloat16, []int64{128, 128}, nil); skip != "" {
		t.Errorf("a plain Linear weight skipped: %s", skip)
	}
}

func TestParseQuantize(t *testing.T) {
	for _, bad := range []string{"fp8", "int4", "fp8-block:0x128", "fp8-block:128", "fp8-block:axb", "nvfp4:16", ""} {
		if _, err := ParseQuantize(bad); !errors.Is(err, ErrQuantizeScheme) {
			t.Errorf("ParseQuantize(%q) = %v, want ErrQuantizeScheme", bad, err)
		}
	}
	s, err := ParseQuantize("FP8-block:64x32")
	if err != nil || s.Block != [2]int64{64, 32} {
		t.Errorf("fp8-block:64x32 -> %+v, %v", s, err)
	}
}

// FuzzQuantizers: any float32 bit patterns (NaN, Inf, subnormals) go
// through every scheme without a panic, and whatever is finite and not
// overflowing reads back finite.
func FuzzQuantizers(f *testing.F) {
	f.Add([]byte{0, 0, 0xc0, 0x7f, 0, 0, 0x80, 0x7f, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := make([]float32, 2*64*32)
		for i := range m {
			if len(b) >= 4 {
				j := (4 * i) % (len(b) - 3)
				m[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[j:]))
			}
		}
		for _, c := range []struct {
			spec  QuantizeSpec
			name  string
			shape []int64
		}{
			{QuantizeSpec{Scheme: SchemeFP8Block, Block: [2]int64{32, 32}}, "a.weight", []int64{128, 32}},
			{QuantizeSpec{Scheme: SchemeFP8Channel}, "a.weight", []int64{128, 32}},
			{QuantizeSpec{Scheme: SchemeNVFP4}, "a.weight", []int64{128, 32}},
			{QuantizeSpec{Scheme: SchemeMXFP4}, "mlp.experts.down_proj", []int64{2, 64, 32}},
		} {
			q, skip := NewQuantizer(c.spec, c.name, dtype.Float32, c.shape, nil)
			if skip != "" {
				t.Fatal(skip)
			}
			runQuantizer(t, q, m)
		}
	})
}
