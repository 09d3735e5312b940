package quant

import (
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestMXFP4Upstream: the transformers-layout dequantization of a gpt-oss
// style expert tensor equals transformers' convert_moe_packed_tensors
// (float32 bit for bit, and its bfloat16 output after rounding),
// including exponent bytes 0 (subnormal products) and 255 (Inf, NaN).
func TestMXFP4Upstream(t *testing.T) {
	f := loadFixture(t, "mxfp4")
	l, err := CheckMXFP4(f.ct("gate_up_proj_blocks"), f.ct("gate_up_proj_scales"))
	if err != nil {
		t.Fatal(err)
	}
	shape, ok := l.TransformersShape()
	if !ok || len(shape) != 3 {
		t.Fatalf("TransformersShape %v %v", shape, ok)
	}
	if want := f.get("expected").Shape; shape[0] != want[0] || shape[1] != want[1] || shape[2] != want[2] {
		t.Fatalf("TransformersShape %v, upstream %v", shape, want)
	}
	blocks, scales := f.get("gate_up_proj_blocks").Data, f.get("gate_up_proj_scales").Data
	got := dequantAll(t, int(shape[0]*shape[1]), int(shape[2]), func(dst []float32, r0, r1 int) error {
		return l.DequantTransposedRows(dst, blocks, scales, r0, r1)
	})
	checkExact(t, f, "", got)

	// The stored orientation, transposed here, is the same data.
	flat := dequantAll(t, l.Rows(), l.Cols(), func(dst []float32, r0, r1 int) error {
		return l.DequantRows(dst, blocks, scales, r0, r1)
	})
	e, h, r := int(shape[0]), int(shape[1]), int(shape[2])
	tr := make([]float32, len(flat))
	for x := 0; x < e; x++ {
		for k := 0; k < h; k++ {
			for i := 0; i < r; i++ {
				tr[(x*h+k)*r+i] = flat[(x*r+i)*h+k]
			}
		}
	}
	checkExact(t, f, "", tr)
}

func TestMXFP4LayoutErrors(t *testing.T) {
	u8 := func(name string, s ...int64) CodecTensor { return CodecTensor{name, dtype.Uint8, s} }
	for _, c := range []struct {
		blocks, scales CodecTensor
		tensor         string
	}{
		{u8("b", 2, 3, 15), u8("s", 2, 3), "b"},
		{u8("b", 16), u8("s"), "b"},
		{u8("b", 2, 3, 16), u8("s", 2, 4), "s"},
		{u8("b", 2, 3, 16), u8("s", 2, 3, 1), "s"},
		{CodecTensor{"b", dtype.Float32, []int64{2, 3, 16}}, u8("s", 2, 3), "b"},
		{u8("b", 2, 3, 16), CodecTensor{"s", dtype.Float16, []int64{2, 3}}, "s"},
		{u8("b", 1<<40, 1<<40, 16), u8("s", 1<<40, 1<<40), "b"},
	} {
		_, err := CheckMXFP4(c.blocks, c.scales)
		var le *CodecLayoutError
		if !errors.As(err, &le) || le.Tensor != c.tensor || !errors.Is(err, ErrCodecLayout) {
			t.Errorf("CheckMXFP4(%v, %v) = %v, want a layout error naming %q", c.blocks.Shape, c.scales.Shape, err, c.tensor)
		}
	}
	l, err := CheckMXFP4(u8("b", 2, 3, 16), u8("s", 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, l.Cols())
	for _, c := range []struct {
		blocks, scales []byte
		r0, r1         int
	}{
		{make([]byte, 95), make([]byte, 6), 0, 1},
		{make([]byte, 96), make([]byte, 5), 0, 1},
		{make([]byte, 96), make([]byte, 6), 1, 3},
		{make([]byte, 96), make([]byte, 6), -1, 0},
	} {
		if err := l.DequantRows(dst, c.blocks, c.scales, c.r0, c.r1); !errors.Is(err, ErrCodecBuffer) {
			t.Errorf("DequantRows(%d, %d, rows %d-%d) = %v, want ErrCodecBuffer", len(c.blocks), len(c.scales), c.r0, c.r1, err)
		}
	}
}

// FuzzMXFP4: any shapes and bytes give a layout error or a decode of the
// exact size, never a panic; allocation is the caller's dst only.
func FuzzMXFP4(f *testing.F) {
	f.Add([]byte{2, 3, 16}, []byte{2, 3}, []byte{1, 2, 3})
	f.Add([]byte{1, 1, 16}, []byte{1, 1}, []byte{255, 0})
	f.Fuzz(func(t *testing.T, bs, ss, data []byte) {
		b := CodecTensor{"b", dtype.Uint8, fuzzShape(bs)}
		s := CodecTensor{"s", dtype.Uint8, fuzzShape(ss)}
		l, err := CheckMXFP4(b, s)
		if err != nil {
			return
		}
		n := l.Rows() * l.Groups
		blocks := make([]byte, n*16)
		scales := make([]byte, n)
		for i := range blocks {
			if len(data) > 0 {
				blocks[i] = data[i%len(data)]
			}
		}
		copy(scales, data)
		dst := make([]float32, l.Rows()*l.Cols())
		if err := l.DequantRows(dst, blocks, scales, 0, l.Rows()); err != nil {
			t.Fatal(err)
		}
		if shape, ok := l.TransformersShape(); ok {
			if err := l.DequantTransposedRows(dst, blocks, scales, 0, int(shape[0]*shape[1])); err != nil {
				t.Fatal(err)
			}
		}
		if n > 0 && l.DequantRows(dst, blocks[:len(blocks)-1], scales, 0, l.Rows()) == nil {
			t.Fatal("short blocks accepted")
		}
	})
}

func BenchmarkMXFP4(b *testing.B) {
	const e, r, g = 4, 2880, 90 // a gpt-oss-20b expert tensor, 4 of its 32 experts
	l, err := CheckMXFP4(CodecTensor{"b", dtype.Uint8, []int64{e, r, g, 16}}, CodecTensor{"s", dtype.Uint8, []int64{e, r, g}})
	if err != nil {
		b.Fatal(err)
	}
	blocks := make([]byte, e*r*g*16)
	scales := make([]byte, e*r*g)
	for i := range blocks {
		blocks[i] = byte(i * 7)
	}
	for i := range scales {
		scales[i] = byte(120 + i%10)
	}
	const chunk = 64
	dst := make([]float32, chunk*l.Cols())
	b.Run("stored", func(b *testing.B) {
		b.SetBytes(int64(len(blocks) + len(scales)))
		for b.Loop() {
			for r0 := 0; r0 < l.Rows(); r0 += chunk {
				r1 := min(l.Rows(), r0+chunk)
				if err := l.DequantRows(dst[:(r1-r0)*l.Cols()], blocks, scales, r0, r1); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("transposed", func(b *testing.B) {
		rows := e * l.Cols()
		dstT := make([]float32, chunk*r)
		b.SetBytes(int64(len(blocks) + len(scales)))
		for b.Loop() {
			for r0 := 0; r0 < rows; r0 += chunk {
				r1 := min(rows, r0+chunk)
				if err := l.DequantTransposedRows(dstT[:(r1-r0)*r], blocks, scales, r0, r1); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
