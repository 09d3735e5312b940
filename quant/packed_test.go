package quant

import (
	"encoding/binary"
	"errors"
	"math"
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
			l, w, zpData := packedFixtureCase(t, f, p, c)
			wd, sd := f.get(w.Name).Data, f.get(p+"weight_scale").Data
			got := dequantAll(t, l.Rows, l.Cols, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, wd, sd, zpData, r0, r1) })
			checkExact(t, f, p, got)
		})
	}
}

// packedFixtureCase checks the layout of a packed or packed_gidx fixture
// case (tensors under prefix p) and returns it, the stored weight and the
// zero points' data (nil when symmetric).
func packedFixtureCase(t *testing.T, f *fixture, p string, c map[string]any) (PackedIntLayout, CodecTensor, []byte) {
	t.Helper()
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
	return l, w, zpData
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

// TestPackedIntGIdxUpstream: pack-quantized (packed zero points, int32
// and int64 g_idx) and int-quantized weights with activation ordering,
// equal to compressed-tensors' dequantize with weight_g_idx
// (_process_quantization's reordering, re-expressed in torch 2.6:
// scripts/gen_quant_fixtures.py gen_packed_gidx), a g_idx of -1s reading
// in column order as upstream's does; and through the scheme's plan, as
// a release reads it.
func TestPackedIntGIdxUpstream(t *testing.T) {
	f := loadFixture(t, "packed_gidx")
	cases := f.cases()
	if len(cases) != 4 {
		t.Fatalf("%d cases", len(cases))
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := name + "."
			l, w, zpData := packedFixtureCase(t, f, p, c)
			if err := l.CheckGIdx(f.ct(p + "weight_g_idx")); err != nil {
				t.Fatal(err)
			}
			wd, sd, gd := f.get(w.Name).Data, f.get(p+"weight_scale").Data, f.get(p+"weight_g_idx").Data
			got := dequantAll(t, l.Rows, l.Cols, func(dst []float32, r0, r1 int) error {
				return l.DequantRowsGIdx(dst, wd, sd, zpData, gd, r0, r1)
			})
			checkExact(t, f, p, got)
			if name != "w4g16unset" {
				// Read in column order instead, the values differ: the
				// fixture's ordering is not the identity.
				plain := dequantAll(t, l.Rows, l.Cols, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, wd, sd, zpData, r0, r1) })
				if sameBits(plain, f.floats(p+"expected")) < 0 {
					t.Fatal("column order gives upstream's values too: the fixture does not test the ordering")
				}
			}
		})
	}
}

// TestPackedIntGIdxErrors: weight_g_idx of the wrong dtype or length is
// refused by the layout check; an index outside the groups, or groups not
// of group_size columns, when decoded.
func TestPackedIntGIdxErrors(t *testing.T) {
	w := CodecTensor{"w", dtype.Int32, []int64{2, 8}}
	l, err := CheckPackedInt(w, []int64{2, 64}, 4, CodecTensor{"s", dtype.Float32, []int64{2, 4}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []CodecTensor{{"g", dtype.Float32, []int64{64}}, {"g", dtype.Int16, []int64{64}}, {"g", dtype.Int32, []int64{63}}, {"g", dtype.Int32, []int64{1, 64}}, {"g", dtype.Int64, []int64{}}} {
		l2 := l
		if err := l2.CheckGIdx(g); !errors.Is(err, ErrCodecLayout) {
			t.Errorf("g_idx %s %v: %v, want a layout error", g.DType, g.Shape, err)
		}
	}
	if err := l.CheckGIdx(CodecTensor{"g", dtype.Int32, []int64{64}}); err != nil {
		t.Fatal(err)
	}
	weight, scale := make([]byte, 2*8*4), make([]byte, 2*4*4)
	gidx := func(f func(c int) int32) []byte {
		b := make([]byte, 4*64)
		for c := 0; c < 64; c++ {
			binary.LittleEndian.PutUint32(b[4*c:], uint32(f(c)))
		}
		return b
	}
	dst := make([]float32, 2*64)
	for what, g := range map[string][]byte{
		"out of range": gidx(func(c int) int32 { return int32(c/16) + 1 }),
		"negative": gidx(func(c int) int32 {
			if c == 5 {
				return -2
			}
			return int32(c / 16)
		}),
		"unequal": gidx(func(c int) int32 { return int32(min(c/15, 3)) }),
		"short":   gidx(func(c int) int32 { return int32(c / 16) })[:100],
	} {
		if err := l.DequantRowsGIdx(dst, weight, scale, nil, g, 0, 2); !errors.Is(err, ErrCodecBuffer) {
			t.Errorf("%s: %v, want ErrCodecBuffer", what, err)
		}
	}
	if err := l.DequantRowsGIdx(dst, weight, scale, nil, gidx(func(c int) int32 { return int32(c % 4) }), 0, 2); err != nil {
		t.Errorf("interleaved groups: %v", err)
	}
	// A -1 anywhere: not set, column order (upstream's is_column_order),
	// whatever the other entries hold.
	if err := l.DequantRowsGIdx(dst, weight, scale, nil, gidx(func(c int) int32 { return int32(c - 1) }), 0, 2); err != nil {
		t.Errorf("g_idx with -1: %v", err)
	}
}

// FuzzPackedGIdx: whatever weight_g_idx holds (its dtype, length and
// values fuzzed), CheckGIdx and DequantRowsGIdx refuse with a typed error
// or decode; a decode puts each column in the group g_idx names (a -1
// anywhere: column order), the group's scale applied.
func FuzzPackedGIdx(f *testing.F) {
	f.Add(uint8(4), false, int64(64), []byte{0, 0, 0, 0, 1, 0, 0, 0})
	f.Add(uint8(2), true, int64(16), []byte{3, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255})
	f.Add(uint8(8), false, int64(63), []byte{255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, groups uint8, wide bool, n int64, seed []byte) {
		const rows, cols = 2, 64
		g := []int{1, 2, 4, 8, 16}[int(groups)%5]
		dt := dtype.Int32
		if wide {
			dt = dtype.Int64
		}
		l, err := CheckPackedInt(CodecTensor{"w", dtype.Int8, []int64{rows, cols}}, nil, 8, CodecTensor{"s", dtype.Float32, []int64{rows, int64(g)}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.CheckGIdx(CodecTensor{"g", dt, []int64{n % 200}}); err != nil {
			if !errors.Is(err, ErrCodecLayout) || n%200 == cols {
				t.Fatalf("g_idx [%d]: %v", n%200, err)
			}
			return
		}
		es := dt.Size()
		gi := make([]byte, cols*es)
		for i := range gi {
			if len(seed) > 0 {
				gi[i] = seed[i%len(seed)]
			}
		}
		// Often a valid ordering: groups from the seed, kept in range.
		if len(seed) > 0 && seed[0]%2 == 0 {
			for c := 0; c < cols; c++ {
				v := uint64((c + int(seed[c%len(seed)])) % g)
				if es == 8 {
					binary.LittleEndian.PutUint64(gi[8*c:], v)
				} else {
					binary.LittleEndian.PutUint32(gi[4*c:], uint32(v))
				}
			}
		}
		weight := make([]byte, rows*cols)
		for i := range weight {
			weight[i] = byte(i%5 + 1)
		}
		scale := make([]byte, 4*rows*g)
		for i := 0; i < rows*g; i++ {
			binary.LittleEndian.PutUint32(scale[4*i:], math.Float32bits(float32(i+1)))
		}
		dst := make([]float32, rows*cols)
		err = l.DequantRowsGIdx(dst, weight, scale, nil, gi, 0, rows)
		if err != nil {
			if !errors.Is(err, ErrCodecBuffer) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		m, _ := l.groupMap(gi)
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				grp := c / (cols / g)
				if m != nil {
					grp = int(m[c])
				}
				if want := float32(int8(weight[r*cols+c])) * float32(r*g+grp+1); dst[r*cols+c] != want {
					t.Fatalf("[%d, %d] = %v, want %v", r, c, dst[r*cols+c], want)
				}
			}
		}
	})
}
