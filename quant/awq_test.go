package quant

import (
	"errors"
	"strconv"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestAWQUpstream: equal to AutoAWQ's dequantize_gemm (transposed to the
// nn.Linear orientation); the interleaved order matters (a sequential
// unpacking, as GPTQModel's AWQ path does, differs).
func TestAWQUpstream(t *testing.T) {
	f := loadFixture(t, "awq")
	gs, _ := strconv.Atoi(f.meta["group_size"])
	l, err := CheckAWQ(f.ct("qweight"), f.ct("qzeros"), f.ct("scales"), gs)
	if err != nil {
		t.Fatal(err)
	}
	qw, qz, sc := f.get("qweight").Data, f.get("qzeros").Data, f.get("scales").Data
	got := dequantAll(t, l.Out, l.In, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, qw, qz, sc, r0, r1) })
	checkExact(t, f, "", got)
	saved := awqColumnNibble
	awqColumnNibble = [8]uint{0, 1, 2, 3, 4, 5, 6, 7}
	defer func() { awqColumnNibble = saved }()
	seq := dequantAll(t, l.Out, l.In, func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, qw, qz, sc, r0, r1) })
	if sameBits(seq, f.floats("expected")) < 0 {
		t.Fatal("sequential nibble order gives upstream's values: the fixture does not test the order")
	}
}

func TestAWQLayoutErrors(t *testing.T) {
	ct := func(name string, d dtype.DType, s ...int64) CodecTensor { return CodecTensor{name, d, s} }
	qw, qz, sc := ct("qw", dtype.Int32, 64, 2), ct("qz", dtype.Int32, 2, 2), ct("s", dtype.Float16, 2, 16)
	if _, err := CheckAWQ(qw, qz, sc, 32); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		qw, qz, sc CodecTensor
		gs         int
	}{
		{qw, qz, sc, 0}, {qw, qz, sc, -1}, {qw, qz, sc, 48}, {qw, qz, sc, 1 << 40},
		{qw, ct("qz", dtype.Int32, 2, 3), sc, 32},
		{qw, qz, ct("s", dtype.Float16, 2, 17), 32},
		{qw, qz, ct("s", dtype.Int32, 2, 16), 32},
		{ct("qw", dtype.Int32, 64), qz, sc, 32},
	} {
		if _, err := CheckAWQ(c.qw, c.qz, c.sc, c.gs); !errors.Is(err, ErrCodecLayout) {
			t.Errorf("case %d: %v, want a layout error", i, err)
		}
	}
}

func FuzzAWQ(f *testing.F) {
	f.Add([]byte{32, 2}, []byte{1, 2}, []byte{1, 16}, int32(32), []byte{1})
	f.Fuzz(func(t *testing.T, qs, zs, ss []byte, gs int32, data []byte) {
		l, err := CheckAWQ(CodecTensor{"qw", dtype.Int32, fuzzShape(qs)}, CodecTensor{"qz", dtype.Int32, fuzzShape(zs)}, CodecTensor{"s", dtype.BFloat16, fuzzShape(ss)}, int(gs))
		if err != nil {
			return
		}
		fill := func(n int) []byte { return fuzzFill(data, n) }
		groups := l.In / l.GroupSize
		dst := make([]float32, l.Out*l.In)
		if err := l.DequantRows(dst, fill(l.In*l.Out/2), fill(groups*l.Out/2), fill(groups*l.Out*2), 0, l.Out); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkAWQ(b *testing.B) {
	const in, out, group = 4096, 1024, 128
	l, err := CheckAWQ(CodecTensor{"qw", dtype.Int32, []int64{in, out / 8}}, CodecTensor{"qz", dtype.Int32, []int64{in / group, out / 8}}, CodecTensor{"s", dtype.Float16, []int64{in / group, out}}, group)
	if err != nil {
		b.Fatal(err)
	}
	qw, qz, sc := make([]byte, in*out/2), make([]byte, in/group*out/2), make([]byte, in/group*out*2)
	benchRows(b, out, in, len(qw)+len(qz)+len(sc), func(dst []float32, r0, r1 int) error { return l.DequantRows(dst, qw, qz, sc, r0, r1) })
}
