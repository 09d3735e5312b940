package quant

import (
	"bytes"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// DequantizeTo's one-pass paths must give the bytes of Dequantize (whose
// float32 values the upstream fixtures check) encoded by
// dtype.EncodeFloat32, for every range: ragged blocks, ranges starting
// and ending inside rows and blocks, stored-row counts that are not a
// multiple of four, NaN and infinite values, every output dtype.

// checkEncode compares DequantizeTo with the staged path over random ranges.
func checkEncode(t *testing.T, c Codec, numel int64, codes []byte, comps [][]byte, r *rand.Rand) {
	t.Helper()
	ranges := [][2]int64{{0, numel}, {0, 1}, {numel - 1, 1}}
	for range 40 {
		a := r.Int63n(numel)
		ranges = append(ranges, [2]int64{a, 1 + r.Int63n(numel-a)})
	}
	for _, dt := range []dtype.DType{dtype.BFloat16, dtype.Float16, dtype.Float32} {
		for _, rg := range ranges {
			first, n := rg[0], rg[1]
			b, e := c.CodeSpan(first, n)
			fs := make([]float32, n)
			if err := c.Dequantize(fs, first, codes[b:e], comps); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, n*int64(dt.Size()))
			dtype.EncodeFloat32(dt, want, fs)
			got := make([]byte, len(want))
			if err := DequantizeTo(c, dt, got, first, codes[b:e], comps); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				t.Fatalf("%s, elements [%d, %d): byte %d is %#x, want %#x", dt, first, first+n, i, got[i], want[i])
			}
		}
	}
}

func TestDequantizeToGrid(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for _, tc := range []struct {
		rows, cols, bh, bw int64
		scale, round       dtype.DType
		f8                 dtype.DType
	}{
		{300, 260, 128, 128, dtype.Float32, dtype.Float32, dtype.Float8E4M3FN}, // ragged both ways
		{256, 512, 128, 128, dtype.Float32, dtype.Float32, dtype.Float8E5M2},
		{64, 1000, 1, 1000, dtype.BFloat16, dtype.BFloat16, dtype.Float8E4M3FN}, // per channel
		{50, 384, 1, 128, dtype.Float16, dtype.Float16, dtype.Float8E4M3FN},     // per group: direct encode
		{33, 77, 33, 77, dtype.Float32, dtype.Float32, dtype.Float8E4M3FN},      // per tensor
	} {
		sr, sc := (tc.rows+tc.bh-1)/tc.bh, (tc.cols+tc.bw-1)/tc.bw
		w := Stored{Name: "w", DType: tc.f8, Shape: []int64{tc.rows, tc.cols}}
		s := Stored{Name: "s", DType: tc.scale, Shape: []int64{sr, sc}}
		c, err := newGrid(w, s, tc.bh, tc.bw, tc.round)
		if err != nil {
			t.Fatal(err)
		}
		codes := make([]byte, tc.rows*tc.cols)
		r.Read(codes) // NaN codes included
		scales := make([]float32, sr*sc)
		for i := range scales {
			scales[i] = float32(math.Ldexp(r.Float64(), r.Intn(40)-20))
		}
		scales[0], scales[len(scales)-1] = float32(math.Inf(1)), 1e-40 // overflow, subnormal products
		sb := make([]byte, len(scales)*tc.scale.Size())
		dtype.EncodeFloat32(tc.scale, sb, scales)
		checkEncode(t, c, tc.rows*tc.cols, codes, [][]byte{sb}, r)
	}
}

func TestDequantizeToMXFP4(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for _, shape := range [][]int64{{2, 7, 3, 16}, {3, 36, 2, 16}, {1, 5, 1, 16}} {
		e, rows, g := shape[0], shape[1], shape[2]
		blocks := Stored{Name: "x_blocks", DType: dtype.Uint8, Shape: shape}
		scales := Stored{Name: "x_scales", DType: dtype.Uint8, Shape: shape[:3]}
		grp, err := mxfp4Group("x", blocks, scales, Config{DType: dtype.BFloat16})
		if err != nil {
			t.Fatal(err)
		}
		codes := make([]byte, e*rows*g*16)
		r.Read(codes)
		sc := make([]byte, e*rows*g)
		r.Read(sc) // 0 (subnormal scales) to 255 (Inf, NaN for zero codes)
		checkEncode(t, grp.Codec, e*rows*g*32, codes, [][]byte{sc}, r)
	}
}
