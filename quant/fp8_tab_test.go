package quant

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestFP8TabBits: the table decode (fp8Tabs.seg, the AVX-512 kernel and
// its Go tail) gives fp8Seg's bfloat16 bits for every code of e4m3fn and
// e5m2 under every scale of fp8TestScales (NaN, subnormal and
// overflowing products among them), over row segments of several blocks
// (widths 64, 128 and 192, starting at block offsets the kernel takes
// and ones it leaves to the tail), with the tables kept between calls
// and rebuilt where a block's scale changes.
func TestFP8TabBits(t *testing.T) {
	if !haveFP8Tab512 {
		t.Skip("no AVX-512 VBMI: the table decode does not run here")
	}
	r := rand.New(rand.NewPCG(7, 8))
	scales := fp8TestScales()
	for _, d := range []dtype.DType{dtype.Float8E4M3FN, dtype.Float8E5M2} {
		k := fp8VecConsts(d)
		tabs := new(fp8Tabs)
		for _, bw := range []int{64, 128, 192} {
			for i := 0; i < len(scales); i += 3 {
				row := []float32{scales[i], scales[(i+1)%len(scales)], scales[(i+2)%len(scales)], scales[(i+3)%len(scales)]}
				tabs.prepare(k, row)
				for _, off := range []int{0, 64 % bw, 37} {
					n := 3*bw - off + 29
					q := make([]byte, n)
					for j := range q {
						q[j] = byte(r.Uint32())
					}
					want, got := make([]byte, 2*n), make([]byte, 2*n)
					fp8Seg(k, fp8ToBF16, want, q, row, bw, off)
					tabs.seg(got, q, 0, bw, off)
					if err := sameBytes(want, got, 2, q); err != nil {
						t.Fatalf("%s bw %d off %d scales %v: %v", d, bw, off, row, err)
					}
				}
			}
		}
	}
}

// TestFP8TabDequantize: DequantizeTo of a block-FP8 weight to bfloat16
// with the table decode gives the bytes of the path without it (fp8Seg),
// for reads of whole block rows, of a few rows and of ragged ranges (the
// table decode takes block rows with fp8TabMinRows rows in the range),
// twice over with the scales changed between (the kept tables rebuilt).
func TestFP8TabDequantize(t *testing.T) {
	if !haveFP8Tab512 {
		t.Skip("no AVX-512 VBMI: the table decode does not run here")
	}
	r := rand.New(rand.NewPCG(9, 10))
	rows, cols := int64(600), int64(448) // 5 block rows (the last of 88 rows), 4 blocks a row (the last of 64)
	w := Stored{Name: "w", DType: dtype.Float8E4M3FN, Shape: []int64{rows, cols}}
	s := Stored{Name: "w_scale_inv", DType: dtype.Float32, Shape: []int64{5, 4}}
	c, err := newGrid(w, s, 128, 128, dtype.Float32)
	if err != nil {
		t.Fatal(err)
	}
	codes := make([]byte, rows*cols)
	for i := range codes {
		codes[i] = byte(r.Uint32())
	}
	sc := make([]float32, 20)
	sb := make([]byte, 4*len(sc))
	for round := range 2 {
		for i := range sc {
			sc[i] = float32(math.Ldexp(r.Float64()+0.5, r.IntN(40)-30))
		}
		sc[3], sc[7] = float32(math.NaN()), 0x1p-140 // NaN and subnormal products
		if round == 1 {
			sc[5] = -sc[5]
		}
		dtype.EncodeFloat32(dtype.Float32, sb, sc)
		for _, rg := range [][2]int64{{0, rows * cols}, {0, 128 * cols}, {5 * cols, 16 * cols}, {3*cols + 77, 20*cols + 5}, {130*cols - 64, 3 * cols}, {17, 1000}} {
			first, n := rg[0], rg[1]
			want, got := make([]byte, 2*n), make([]byte, 2*n)
			haveFP8Tab512 = false
			err1 := DequantizeTo(c, dtype.BFloat16, want, first, codes[first:first+n], [][]byte{sb})
			haveFP8Tab512 = true
			err2 := DequantizeTo(c, dtype.BFloat16, got, first, codes[first:first+n], [][]byte{sb})
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if err := sameBytes(want, got, 2, codes[first:first+n]); err != nil {
				t.Fatalf("round %d, elements [%d, +%d): %v", round, first, n, err)
			}
		}
	}
}

// BenchmarkFP8TabChunk: DequantizeTo to bfloat16 of 64 Ki codes (16 rows
// of 4096, 32 blocks a row) as ckpt diff reads a block-FP8 tensor, in and
// out of cache; ns a code. BenchmarkFP8SegChunk: the same through fp8Seg.
func BenchmarkFP8TabChunk(b *testing.B) { benchFP8Chunk(b, true) }
func BenchmarkFP8SegChunk(b *testing.B) { benchFP8Chunk(b, false) }

func benchFP8Chunk(b *testing.B, tab bool) {
	defer func(v bool) { haveFP8Tab512 = v }(haveFP8Tab512)
	haveFP8Tab512 = haveFP8Tab512 && tab
	rows, cols := int64(1024), int64(4096)
	w := Stored{Name: "w", DType: dtype.Float8E4M3FN, Shape: []int64{rows, cols}}
	s := Stored{Name: "w_scale_inv", DType: dtype.Float32, Shape: []int64{8, 32}}
	c, err := newGrid(w, s, 128, 128, dtype.Float32)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 16
	codes := make([]byte, n)
	for i := range codes {
		codes[i] = byte(r.Uint32()) &^ 0x08 // no NaN codes, as in a real weight
	}
	sc := make([]float32, 8*32)
	for i := range sc {
		sc[i] = r.Float32() / 448
	}
	sb := make([]byte, 4*len(sc))
	dtype.EncodeFloat32(dtype.Float32, sb, sc)
	out := make([]byte, 2*n)
	b.SetBytes(n)
	b.ResetTimer()
	for i := range b.N {
		first := int64(i%64) * n // through the block rows, 8 reads each
		if err := DequantizeTo(c, dtype.BFloat16, out, first, codes, [][]byte{sb}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/code")
}
