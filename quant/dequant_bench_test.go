package quant

import (
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Benchmarks of the codecs' decode alone, one goroutine, data in memory:
// a DeepSeek-V3 block-FP8 weight [7168, 2048] and one gpt-oss-20b
// expert's MXFP4 gate_up_proj ([1, 5760, 90, 16] read as [1, 2880,
// 5760]), each to float32 and to bfloat16 (DequantizeTo), 256 Ki
// elements a call as statedict's reader asks (whole groups of 32 output
// rows for MXFP4, quant.ChunkAlign). SetBytes is the output's
// bytes, so MB/s compares with cp of the output.

func benchFP8Codec(b *testing.B) (Codec, []byte, [][]byte, int64) {
	b.Helper()
	rows, cols := int64(7168), int64(2048)
	w := Stored{Name: "w", DType: dtype.Float8E4M3FN, Shape: []int64{rows, cols}}
	s := Stored{Name: "w_scale_inv", DType: dtype.Float32, Shape: []int64{56, 16}}
	c, err := newGrid(w, s, 128, 128, dtype.Float32)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	codes := make([]byte, rows*cols)
	r.Read(codes)
	for i, q := range codes {
		if q&0x7f == 0x7f {
			codes[i] = q - 1 // no NaN codes, as in a real weight
		}
	}
	scales := make([]float32, 56*16)
	for i := range scales {
		scales[i] = r.Float32() / 448
	}
	sb := make([]byte, 4*len(scales))
	dtype.EncodeFloat32(dtype.Float32, sb, scales)
	return c, codes, [][]byte{sb}, rows * cols
}

func benchMXFP4Codec(b *testing.B) (Codec, []byte, [][]byte, int64) {
	b.Helper()
	blocks := Stored{Name: "x_blocks", DType: dtype.Uint8, Shape: []int64{1, 5760, 90, 16}}
	scales := Stored{Name: "x_scales", DType: dtype.Uint8, Shape: []int64{1, 5760, 90}}
	g, err := mxfp4Group("x", blocks, scales, Config{DType: dtype.BFloat16})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	codes := make([]byte, 5760*90*16)
	r.Read(codes)
	sc := make([]byte, 5760*90)
	for i := range sc {
		sc[i] = byte(118 + r.Intn(12))
	}
	return g.Codec, codes, [][]byte{sc}, 5760 * 90 * 32
}

const benchChunk = 1 << 18

// benchDequant decodes the whole weight to dt: float32 through Dequantize,
// other dtypes through DequantizeTo, or (staged) through Dequantize and
// dtype.EncodeFloat32 as before the one-pass paths.
func benchDequant(b *testing.B, mk func(*testing.B) (Codec, []byte, [][]byte, int64), dt dtype.DType, staged ...bool) {
	c, codes, comps, n := mk(b)
	step := int64(benchChunk) // as statedict's reader: chunks of whole groups where the codec asks
	if a := ChunkAlign(c); a > 1 {
		step = (benchChunk + a - 1) / a * a
	}
	out := make([]byte, step*int64(dt.Size()))
	f32 := make([]float32, step)
	b.SetBytes(n * int64(dt.Size()))
	b.ResetTimer()
	for range b.N {
		for e := int64(0); e < n; e += step {
			k := min(step, n-e)
			cb, ce := c.CodeSpan(e, k)
			var err error
			switch {
			case dt == dtype.Float32:
				err = c.Dequantize(f32[:k], e, codes[cb:ce], comps)
			case len(staged) > 0:
				if err = c.Dequantize(f32[:k], e, codes[cb:ce], comps); err == nil {
					dtype.EncodeFloat32(dt, out[:k*int64(dt.Size())], f32[:k])
				}
			default:
				err = DequantizeTo(c, dt, out[:k*int64(dt.Size())], e, codes[cb:ce], comps)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkDequantFP8BlockF32(b *testing.B)  { benchDequant(b, benchFP8Codec, dtype.Float32) }
func BenchmarkDequantFP8BlockBF16(b *testing.B) { benchDequant(b, benchFP8Codec, dtype.BFloat16) }
func BenchmarkDequantMXFP4F32(b *testing.B)     { benchDequant(b, benchMXFP4Codec, dtype.Float32) }
func BenchmarkDequantMXFP4BF16(b *testing.B)    { benchDequant(b, benchMXFP4Codec, dtype.BFloat16) }
func BenchmarkDequantFP8BlockBF16Staged(b *testing.B) {
	benchDequant(b, benchFP8Codec, dtype.BFloat16, true)
}
func BenchmarkDequantMXFP4BF16Staged(b *testing.B) {
	benchDequant(b, benchMXFP4Codec, dtype.BFloat16, true)
}

// BenchmarkDequantFP8BlockBF16Table is BenchmarkDequantFP8BlockBF16
// through the per-block tables (grid_encode.go), the vector decode off.
func BenchmarkDequantFP8BlockBF16Table(b *testing.B) {
	benchDequant(b, func(b *testing.B) (Codec, []byte, [][]byte, int64) {
		c, codes, comps, n := benchFP8Codec(b)
		c.(*gridCodec).vec = nil
		return c, codes, comps, n
	}, dtype.BFloat16)
}

// BenchmarkDequantFP8BlockBF16Seg is BenchmarkDequantFP8BlockBF16 with
// the table decode (fp8_tab.go) off: fp8Seg's kernel on every code.
func BenchmarkDequantFP8BlockBF16Seg(b *testing.B) {
	defer func(v bool) { haveFP8Tab512 = v }(haveFP8Tab512)
	haveFP8Tab512 = false
	benchDequant(b, benchFP8Codec, dtype.BFloat16)
}

func BenchmarkDequantFP8BlockF16(b *testing.B) { benchDequant(b, benchFP8Codec, dtype.Float16) }

// BenchmarkDequantFP8BlockBF16AVX2 is BenchmarkDequantFP8BlockBF16 with
// the AVX-512 kernel off (the AVX2 one, a call per row segment).
func BenchmarkDequantFP8BlockBF16AVX2(b *testing.B) {
	defer func(v bool) { haveFP8Vec512 = v }(haveFP8Vec512)
	haveFP8Vec512 = false
	benchDequant(b, benchFP8Codec, dtype.BFloat16)
}

// BenchmarkDequantMXFP4BF16AVX2 is BenchmarkDequantMXFP4BF16 with the
// AVX-512 kernel off (the AVX2 one, 16 stored rows a call).
func BenchmarkDequantMXFP4BF16AVX2(b *testing.B) {
	defer func(v bool) { haveMXFP4Vec512 = v }(haveMXFP4Vec512)
	haveMXFP4Vec512 = false
	benchDequant(b, benchMXFP4Codec, dtype.BFloat16)
}

func BenchmarkDequantMXFP4F16(b *testing.B) { benchDequant(b, benchMXFP4Codec, dtype.Float16) }

// BenchmarkDequantMXFP4F16Table is BenchmarkDequantMXFP4F16 with the
// AVX-512 kernel off (the table, four stored rows a store).
func BenchmarkDequantMXFP4F16Table(b *testing.B) {
	defer func(v bool) { haveMXFP4Vec512 = v }(haveMXFP4Vec512)
	haveMXFP4Vec512 = false
	benchDequant(b, benchMXFP4Codec, dtype.Float16)
}

// BenchmarkDequantMXFP4BF16Span is BenchmarkDequantMXFP4BF16 through the
// expert's Span with its scale columns made once (Span.Prepare, as
// statedict reads an expert), not a chunk's columns every call; the
// columns' cost is BenchmarkMXFP4ScaleColumns.
func BenchmarkDequantMXFP4BF16Span(b *testing.B) {
	benchDequant(b, func(b *testing.B) (Codec, []byte, [][]byte, int64) {
		c, codes, comps, n := benchMXFP4Codec(b)
		sp, ok := SubCodec(c, 0, n)
		if !ok {
			b.Fatal("no span")
		}
		pc, _ := sp.Prepare(comps, nil)
		return pc, codes, comps, n
	}, dtype.BFloat16)
}

// BenchmarkMXFP4ScaleColumns: one gpt-oss-20b gate_up expert's scales
// (5760 rows x 90 groups) made columns; SetBytes is the expert's bf16
// output, so MB/s compares with the decode benchmarks.
func BenchmarkMXFP4ScaleColumns(b *testing.B) {
	_, _, comps, n := benchMXFP4Codec(b)
	l := MXFP4Layout{Prefix: []int{1, 5760}, Groups: 90}
	dst := make([]byte, len(comps[0]))
	b.SetBytes(2 * n)
	b.ResetTimer()
	for range b.N {
		l.scaleColumns(dst, comps[0])
	}
}
