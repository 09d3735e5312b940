package quant

import (
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestGPTQUpstream: 2, 3, 4 and 8 bits, v1 (stored zero-1) and v2, with
// and without act-order g_idx, equal to AutoGPTQ's torch dequantization.
func TestGPTQUpstream(t *testing.T) {
	f := loadFixture(t, "gptq")
	for name, c := range f.cases() {
		t.Run(name, func(t *testing.T) {
			p := name + "."
			g := f.ct(p + "g_idx")
			l, err := CheckGPTQ(f.ct(p+"qweight"), f.ct(p+"qzeros"), f.ct(p+"scales"), &g, int(c["bits"].(float64)), int(c["group_size"].(float64)), c["v2"].(bool))
			if err != nil {
				t.Fatal(err)
			}
			qw, qz, sc, gi := f.get(p+"qweight").Data, f.get(p+"qzeros").Data, f.get(p+"scales").Data, f.get(p+"g_idx").Data
			got := dequantAll(t, l.Out, l.In, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, qw, qz, sc, gi, r0, r1) })
			checkExact(t, f, p, got)
			if !c["act_order"].(bool) { // sequential g_idx: the same without it
				l2, err := CheckGPTQ(f.ct(p+"qweight"), f.ct(p+"qzeros"), f.ct(p+"scales"), nil, l.Bits, int(c["group_size"].(float64)), l.V2)
				if err != nil {
					t.Fatal(err)
				}
				checkExact(t, f, p, dequantAll(t, l.Out, l.In, func(dst []float32, r0, r1 int) error { return l2.DequantRows(dst, qw, qz, sc, nil, r0, r1) }))
			}
			// the other zero-point convention must differ
			l.V2 = !l.V2
			other := dequantAll(t, l.Out, l.In, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, qw, qz, sc, gi, r0, r1) })
			if sameBits(other, f.floats(p+"expected")) < 0 {
				t.Fatal("v1 and v2 zero points give the same values")
			}
		})
	}
}

func TestGPTQLayoutErrors(t *testing.T) {
	ct := func(name string, d dtype.DType, s ...int64) CodecTensor { return CodecTensor{name, d, s} }
	qw, qz, sc, gi := ct("qw", dtype.Int32, 8, 16), ct("qz", dtype.Int32, 2, 2), ct("s", dtype.Float16, 2, 16), ct("g", dtype.Int32, 64)
	if _, err := CheckGPTQ(qw, qz, sc, &gi, 4, 32, false); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		qw, qz, sc CodecTensor
		g          *CodecTensor
		bits, gs   int
	}{
		{qw, qz, sc, &gi, 5, 32},
		{qw, qz, sc, &gi, 0, 32},
		{qw, ct("qz", dtype.Int32, 2, 3), sc, &gi, 4, 32},
		{qw, qz, ct("s", dtype.Float16, 3, 16), &gi, 4, 32},
		{qw, qz, ct("s", dtype.Float16, 2, 15), &gi, 4, 32},
		{qw, qz, sc, &CodecTensor{"g", dtype.Int32, []int64{63}}, 4, 32},
		{qw, qz, sc, nil, 4, 0},
		{qw, qz, sc, nil, 4, 1 << 40},
		{qw, qz, sc, nil, 4, 16},
		{ct("qw", dtype.Float32, 8, 16), qz, sc, &gi, 4, 32},
	} {
		if _, err := CheckGPTQ(c.qw, c.qz, c.sc, c.g, c.bits, c.gs, false); !errors.Is(err, ErrCodecLayout) {
			t.Errorf("case %d: %v, want a layout error", i, err)
		}
	}
	// a g_idx entry out of range is refused, not an index panic
	l, _ := CheckGPTQ(qw, qz, sc, &gi, 4, 32, false)
	g := make([]byte, 4*64)
	g[4*10] = 2
	if err := l.DequantRows(make([]float32, 64), make([]byte, 8*16*4), make([]byte, 16), make([]byte, 64), g, 0, 1); !errors.Is(err, ErrCodecBuffer) {
		t.Errorf("g_idx 2 of 2 groups: %v", err)
	}
}

func FuzzGPTQ(f *testing.F) {
	f.Add([]byte{8, 16}, []byte{2, 2}, []byte{2, 16}, uint8(4), int16(32), true, []byte{1, 0})
	f.Add([]byte{3, 4}, []byte{1, 1}, []byte{1, 4}, uint8(3), int16(-1), false, []byte{7})
	f.Fuzz(func(t *testing.T, qs, zs, ss []byte, bits uint8, gs int16, withG bool, data []byte) {
		var g *CodecTensor
		if withG && len(qs) > 0 {
			g = &CodecTensor{"g", dtype.Int32, []int64{int64(qs[0]%41) * 32 / int64(max(1, bits%9))}}
		}
		l, err := CheckGPTQ(CodecTensor{"qw", dtype.Int32, fuzzShape(qs)}, CodecTensor{"qz", dtype.Int32, fuzzShape(zs)}, CodecTensor{"s", dtype.Float16, fuzzShape(ss)}, g, int(bits%9), int(gs), withG)
		if err != nil {
			return
		}
		fill := func(n int) []byte { return fuzzFill(data, n) }
		var gd []byte
		if g != nil {
			gd = fill(4 * l.In)
		}
		dst := make([]float32, l.Out*l.In)
		err = l.DequantRows(dst, fill(l.In*l.Bits/32*l.Out*4), fill(l.Groups*codecCeilDiv(l.Out*l.Bits, 32)*4), fill(2*l.Groups*l.Out), gd, 0, l.Out)
		if err != nil && !errors.Is(err, ErrCodecBuffer) {
			t.Fatal(err)
		}
	})
}

func BenchmarkGPTQ(b *testing.B) {
	const in, out, group = 4096, 1024, 128
	l, err := CheckGPTQ(CodecTensor{"qw", dtype.Int32, []int64{in / 8, out}}, CodecTensor{"qz", dtype.Int32, []int64{in / group, out / 8}}, CodecTensor{"s", dtype.Float16, []int64{in / group, out}}, nil, 4, group, false)
	if err != nil {
		b.Fatal(err)
	}
	qw, qz, sc := make([]byte, in/8*out*4), make([]byte, in/group*out/8*4), make([]byte, in/group*out*2)
	for i := range qw {
		qw[i] = byte(i * 5)
	}
	benchRows(b, out, in, len(qw)+len(qz)+len(sc), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, qw, qz, sc, nil, r0, r1) })
}
