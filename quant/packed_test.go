package quant

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestPackedIntUpstream: pack-quantized at 3, 4 and 8 bits (group and
// channel, symmetric and with packed zero points) and int-quantized int8,
// equal to compressed-tensors' unpack_from_int32 + dequantize.
func TestPackedIntUpstream(t *testing.T) {
	f := loadFixture(t, "packed")
	cases := f.cases()
	if len(cases) != 5 {
		t.Fatalf("%d cases", len(cases))
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := name + "."
			var w CodecTensor
			var shape []int64
			if c["packed"].(bool) {
				w = f.ct(p + "weight_packed")
				sb := f.get(p + "weight_shape").Data
				shape = []int64{int64(binary.LittleEndian.Uint64(sb)), int64(binary.LittleEndian.Uint64(sb[8:]))}
			} else {
				w = f.ct(p + "weight")
			}
			var zp *CodecTensor
			var zpData []byte
			if _, ok := f.tensors[p+"weight_zero_point"]; ok {
				z := f.ct(p + "weight_zero_point")
				zp, zpData = &z, f.get(p+"weight_zero_point").Data
			}
			l, err := CheckPackedInt(w, shape, int(c["bits"].(float64)), f.ct(p+"weight_scale"), zp)
			if err != nil {
				t.Fatal(err)
			}
			wd, sd := f.get(w.Name).Data, f.get(p+"weight_scale").Data
			got := dequantAll(t, l.Rows, l.Cols, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, wd, sd, zpData, r0, r1) })
			checkExact(t, f, p, got)
		})
	}
}

func TestPackedIntLayoutErrors(t *testing.T) {
	ct := func(name string, d dtype.DType, s ...int64) CodecTensor { return CodecTensor{name, d, s} }
	w, sc := ct("w", dtype.Int32, 8, 8), ct("s", dtype.BFloat16, 8, 2)
	zp := ct("z", dtype.Int32, 1, 2)
	if _, err := CheckPackedInt(w, []int64{8, 64}, 4, sc, &zp); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		w     CodecTensor
		shape []int64
		bits  int
		s     CodecTensor
		z     *CodecTensor
	}{
		{w, []int64{8, 65}, 4, sc, nil}, // packed size does not match weight_shape
		{w, []int64{8, 64}, 3, sc, nil}, // nor at 3 bits
		{w, []int64{8, 64}, 0, sc, nil}, // bits 0
		{w, []int64{8, 64}, 9, sc, nil}, // bits 9
		{w, []int64{8}, 4, sc, nil},     // weight_shape rank
		{w, []int64{8, 64}, 4, ct("s", dtype.BFloat16, 8, 3), nil},
		{w, []int64{8, 64}, 4, ct("s", dtype.BFloat16, 8, 0), nil},
		{w, []int64{8, 64}, 4, ct("s", dtype.Int8, 8, 2), nil},
		{w, []int64{8, 64}, 4, sc, &CodecTensor{"z", dtype.Int32, []int64{2, 2}}},
		{w, []int64{8, 64}, 4, sc, &CodecTensor{"z", dtype.Float32, []int64{1, 2}}},
		{ct("w", dtype.Float32, 8, 8), []int64{8, 64}, 4, sc, nil},
		{ct("w", dtype.Int8, 8, 64), nil, 8, ct("s", dtype.Float32, 8, 1), &CodecTensor{"z", dtype.Int8, []int64{8}}},
	} {
		_, err := CheckPackedInt(c.w, c.shape, c.bits, c.s, c.z)
		if !errors.Is(err, ErrCodecLayout) {
			t.Errorf("case %d: %v, want a layout error", i, err)
		}
	}
}

func FuzzPackedInt(f *testing.F) {
	f.Add([]byte{4, 8}, []byte{4, 64}, uint8(4), []byte{4, 2}, []byte{1, 2}, true, []byte{1, 2, 3})
	f.Add([]byte{4, 3}, []byte{4, 32}, uint8(3), []byte{4, 1}, []byte{1, 1}, true, []byte{9})
	f.Fuzz(func(t *testing.T, ws, shape []byte, bits uint8, ss, zs []byte, hasZP bool, data []byte) {
		w := CodecTensor{"w", dtype.Int32, fuzzShape(ws)}
		if bits%2 == 1 {
			w.DType = dtype.Int8
		}
		var zp *CodecTensor
		if hasZP {
			zp = &CodecTensor{"z", dtype.Int32, fuzzShape(zs)}
			if len(zs) > 0 && zs[0]%2 == 1 {
				zp.DType = dtype.Int8
			}
		}
		var sh []int64
		for i := 0; i < len(shape) && i < 3; i++ {
			sh = append(sh, int64(shape[i]))
		}
		l, err := CheckPackedInt(w, sh, int(bits%12), CodecTensor{"s", dtype.Float16, fuzzShape(ss)}, zp)
		if err != nil {
			return
		}
		fill := func(n int) []byte { return fuzzFill(data, n) }
		nw := l.Rows * l.Cols
		if l.Packed {
			nw = l.Rows * codecCeilDiv(l.Cols*l.Bits, 32) * 4
		}
		ns := l.Rows * l.Groups
		if l.TensorWide {
			ns = 1
		}
		nz := 0
		switch l.ZeroPoint {
		case zpInt8:
			nz = ns
		case zpPacked:
			nz = codecCeilDiv(l.Rows*l.Bits, 32) * l.Groups * 4
		}
		dst := make([]float32, l.Rows*l.Cols)
		if err := l.DequantRows(dst, fill(nw), fill(2*ns), fill(nz), 0, l.Rows); err != nil {
			t.Fatal(err)
		}
		if nw > 0 && l.DequantRows(dst, fill(nw-1), fill(2*ns), fill(nz), 0, l.Rows) == nil {
			t.Fatal("short weight accepted")
		}
	})
}

func BenchmarkPackedInt(b *testing.B) {
	const rows, cols = 2048, 4096
	for _, bits := range []int{4, 8} {
		words := cols * bits / 32
		l, err := CheckPackedInt(CodecTensor{"w", dtype.Int32, []int64{rows, int64(words)}}, []int64{rows, cols}, bits,
			CodecTensor{"s", dtype.BFloat16, []int64{rows, cols / 128}}, &CodecTensor{"z", dtype.Int32, []int64{rows * int64(bits) / 32, cols / 128}})
		if err != nil {
			b.Fatal(err)
		}
		w, s, z := make([]byte, rows*words*4), make([]byte, rows*cols/128*2), make([]byte, rows*bits/32*cols/128*4)
		for i := range w {
			w[i] = byte(i * 7)
		}
		for i := range s {
			s[i] = 0x3c
		}
		b.Run(map[int]string{4: "int4g128", 8: "int8g128"}[bits], func(b *testing.B) {
			benchRows(b, rows, cols, len(w)+len(s)+len(z), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, w, s, z, r0, r1) })
		})
	}
}
