package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestNVFP4Upstream: equal to compressed-tensors' NVFP4 decompression
// (float32 bit for bit; its bfloat16 output after rounding).
func TestNVFP4Upstream(t *testing.T) {
	f := loadFixture(t, "nvfp4")
	l, err := CheckNVFP4(f.ct("weight_packed"), f.ct("weight_scale"), f.ct("weight_global_scale"))
	if err != nil {
		t.Fatal(err)
	}
	p, s, g := f.get("weight_packed").Data, f.get("weight_scale").Data, f.get("weight_global_scale").Data
	got := dequantAll(t, l.Rows, l.Cols, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, p, s, g, r0, r1) })
	checkExact(t, f, "", got)
}

func TestNVFP4LayoutErrors(t *testing.T) {
	ct := func(name string, d dtype.DType, s ...int64) CodecTensor { return CodecTensor{name, d, s} }
	p, s, g := ct("p", dtype.Uint8, 4, 16), ct("s", dtype.Float8E4M3FN, 4, 2), ct("g", dtype.Float32, 1)
	if _, err := CheckNVFP4(p, s, g); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]CodecTensor{
		{ct("p", dtype.Uint8, 4, 12), s, g},
		{ct("p", dtype.Int32, 4, 16), s, g},
		{p, ct("s", dtype.Float8E4M3FN, 4, 4), g},
		{p, ct("s", dtype.Float32, 4, 2), g},
		{p, ct("s", dtype.Float8E4M3FN, 3, 2), g},
		{p, s, ct("g", dtype.Float32, 2)},
		{p, s, ct("g", dtype.BFloat16, 1)},
	} {
		_, err := CheckNVFP4(c[0], c[1], c[2])
		var le *CodecLayoutError
		if !errors.As(err, &le) || le.Scheme != "nvfp4" {
			t.Errorf("CheckNVFP4(%v, %v, %v) = %v, want a layout error", c[0], c[1], c[2], err)
		}
	}
}

func FuzzNVFP4(f *testing.F) {
	f.Add([]byte{4, 16}, []byte{4, 2}, []byte{1}, []byte{1, 2, 3}, float32(3))
	f.Add([]byte{1, 8}, []byte{1, 1}, []byte{}, []byte{0x7f}, float32(math.NaN()))
	f.Fuzz(func(t *testing.T, ps, ss, gs, data []byte, global float32) {
		l, err := CheckNVFP4(CodecTensor{"p", dtype.Uint8, fuzzShape(ps)}, CodecTensor{"s", dtype.Float8E4M3FN, fuzzShape(ss)}, CodecTensor{"g", dtype.Float32, fuzzShape(gs)})
		if err != nil {
			return
		}
		packed := make([]byte, l.Rows*l.Cols/2)
		scale := make([]byte, l.Rows*l.Cols/16)
		for i := range packed {
			packed[i] = byte(i) ^ byte(len(data))
		}
		copy(scale, data)
		gb := binary.LittleEndian.AppendUint32(nil, math.Float32bits(global))
		dst := make([]float32, l.Rows*l.Cols)
		if err := l.DequantRows(dst, packed, scale, gb, 0, l.Rows); err != nil {
			t.Fatal(err)
		}
		if l.DequantRows(dst, packed, scale, gb[:3], 0, l.Rows) == nil {
			t.Fatal("short global scale accepted")
		}
	})
}

func BenchmarkNVFP4(b *testing.B) {
	const rows, cols = 4096, 4096
	l, err := CheckNVFP4(CodecTensor{"p", dtype.Uint8, []int64{rows, cols / 2}}, CodecTensor{"s", dtype.Float8E4M3FN, []int64{rows, cols / 16}}, CodecTensor{"g", dtype.Float32, []int64{1}})
	if err != nil {
		b.Fatal(err)
	}
	packed, scale := make([]byte, rows*cols/2), make([]byte, rows*cols/16)
	for i := range packed {
		packed[i] = byte(i * 13)
	}
	for i := range scale {
		scale[i] = byte(40 + i%30)
	}
	g := binary.LittleEndian.AppendUint32(nil, math.Float32bits(2688))
	benchRows(b, rows, cols, len(packed)+len(scale), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, packed, scale, g, r0, r1) })
}
