package quant

import (
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestMLXUpstream: every bit width mlx writes (2, 3, 4, 5, 6, 8), group
// sizes 32/64/128, float16/bfloat16/float32 scales, equal to mlx's affine
// formula over its packing.
func TestMLXUpstream(t *testing.T) {
	f := loadFixture(t, "mlx")
	seen := map[int]bool{}
	for name, c := range f.cases() {
		t.Run(name, func(t *testing.T) {
			p := name + "."
			w := f.ct(p + "weight")
			w.DType = dtype.Uint32 // stored as I32 by the generator's safetensors (no U32 there), same bytes
			l, err := CheckMLX(w, f.ct(p+"scales"), f.ct(p+"biases"), int(c["bits"].(float64)), int(c["group_size"].(float64)))
			if err != nil {
				t.Fatal(err)
			}
			seen[l.Bits] = true
			wd, s, b := f.get(p+"weight").Data, f.get(p+"scales").Data, f.get(p+"biases").Data
			checkExact(t, f, p, dequantAll(t, l.Rows(), l.Cols, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, wd, s, b, r0, r1) }))
		})
	}
	if len(seen) != 6 {
		t.Errorf("bit widths tested: %v", seen)
	}
}

func TestMLXLayoutErrors(t *testing.T) {
	ct := func(name string, d dtype.DType, s ...int64) CodecTensor { return CodecTensor{name, d, s} }
	w, s, b := ct("w", dtype.Uint32, 4, 16), ct("s", dtype.BFloat16, 4, 2), ct("b", dtype.BFloat16, 4, 2)
	if _, err := CheckMLX(w, s, b, 4, 64); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		w, s, b    CodecTensor
		bits, gsiz int
	}{
		{w, s, b, 7, 64}, {w, s, b, 4, 0}, {w, s, b, 4, 16}, {w, s, b, 4, 1 << 40},
		{w, s, b, 3, 64}, // 16 words of 3-bit codes: not whole groups of 64
		{w, ct("s", dtype.BFloat16, 4, 3), b, 4, 64},
		{w, s, ct("b", dtype.Float16, 4, 2), 4, 64},
		{w, s, ct("b", dtype.BFloat16, 5, 2), 4, 64},
		{ct("w", dtype.Int32, 4, 16), s, b, 4, 64},
		{ct("w", dtype.Uint32, 16), s, b, 4, 64},
	} {
		if _, err := CheckMLX(c.w, c.s, c.b, c.bits, c.gsiz); !errors.Is(err, ErrCodecLayout) {
			t.Errorf("case %d: %v, want a layout error", i, err)
		}
	}
}

func FuzzMLX(f *testing.F) {
	f.Add([]byte{4, 16}, []byte{4, 2}, uint8(4), uint8(64), []byte{0x7f, 0xc0})
	f.Fuzz(func(t *testing.T, ws, ss []byte, bits, gs uint8, data []byte) {
		l, err := CheckMLX(CodecTensor{"w", dtype.Uint32, fuzzShape(ws)}, CodecTensor{"s", dtype.BFloat16, fuzzShape(ss)}, CodecTensor{"b", dtype.BFloat16, fuzzShape(ss)}, int(bits%9), int(gs))
		if err != nil {
			return
		}
		fill := func(n int) []byte { return fuzzFill(data, n) }
		g := l.Rows() * l.Cols / l.GroupSize * 2
		dst := make([]float32, l.Rows()*l.Cols)
		if err := l.DequantRows(dst, fill(l.Rows()*l.Cols*l.Bits/8), fill(g), fill(g), 0, l.Rows()); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkMLX(b *testing.B) {
	const rows, cols = 1024, 4096
	for _, bits := range []int{4, 8} {
		w := make([]byte, rows*cols*bits/8)
		for i := range w {
			w[i] = byte(i * 3)
		}
		l, err := CheckMLX(CodecTensor{"w", dtype.Uint32, []int64{rows, int64(cols * bits / 32)}}, CodecTensor{"s", dtype.BFloat16, []int64{rows, cols / 64}}, CodecTensor{"b", dtype.BFloat16, []int64{rows, cols / 64}}, bits, 64)
		if err != nil {
			b.Fatal(err)
		}
		s := make([]byte, rows*cols/64*2)
		b.Run(map[int]string{4: "4bit", 8: "8bit"}[bits], func(b *testing.B) {
			benchRows(b, rows, cols, len(w)+2*len(s), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, w, s, s, r0, r1) })
		})
	}
}
