package ggml_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/internal/ggmlref"
)

func TestMain(m *testing.M) {
	code := m.Run()
	ggmlref.Cleanup()
	os.Exit(code)
}

func TestTypeTable(t *testing.T) {
	ts := ggml.Types()
	if len(ts) != 32 {
		t.Errorf("%d types, want 32", len(ts))
	}
	for _, typ := range ts {
		p, err := ggml.ParseType(typ.String())
		if err != nil || p != typ {
			t.Errorf("ParseType(%q) = %v, %v", typ.String(), p, err)
		}
	}
	if p, err := ggml.ParseType("Q4_K"); err != nil || p != ggml.Q4_K {
		t.Errorf("ParseType(Q4_K) = %v, %v", p, err)
	}
	for _, id := range []ggml.Type{4, 5, 31, 32, 33, 36, 37, 38, 40, 1 << 31} {
		if id.Known() || id.BlockSize() != 0 || id.TypeSize() != 0 {
			t.Errorf("type %d known", uint32(id))
		}
		if _, err := id.RowBytes(32); !errors.Is(err, ggml.ErrUnknownType) {
			t.Errorf("RowBytes of type %d: %v", uint32(id), err)
		}
		if err := ggml.Dequantize(id, nil, nil); !errors.Is(err, ggml.ErrUnknownType) {
			t.Errorf("Dequantize of type %d: %v", uint32(id), err)
		}
	}
	if got := ggml.Type(40).String(); got != "type(40)" {
		t.Errorf("String of 40 = %q", got)
	}
	if _, err := ggml.ParseType("q4_2\n"); !errors.Is(err, ggml.ErrUnknownType) || err.Error() != `ggml: parse "q4_2\n": unknown ggml type` {
		t.Errorf("ParseType error: %v", err)
	}
}

func TestRowBytes(t *testing.T) {
	for _, c := range []struct {
		t    ggml.Type
		n    int64
		want int64
		err  error
	}{
		{ggml.F32, 3, 12, nil},
		{ggml.Q4_K, 512, 288, nil},
		{ggml.Q8_0, 64, 68, nil},
		{ggml.Q8_0, 33, 0, ggml.ErrBlockMultiple},
		{ggml.F16, -1, 0, ggml.ErrBlockMultiple},
		{ggml.I64, math.MaxInt64 / 4, 0, ggml.ErrOverflow},
		{ggml.Q8_K, math.MaxInt64 / 256 * 256, 0, ggml.ErrOverflow},
		{ggml.I8, math.MaxInt64, math.MaxInt64, nil},
	} {
		got, err := c.t.RowBytes(c.n)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%v.RowBytes(%d) = %d, %v; want %d, %v", c.t, c.n, got, err, c.want, c.err)
		}
	}
}

func TestSizeErrors(t *testing.T) {
	dst := make([]float32, 32)
	if err := ggml.Dequantize(ggml.Q8_0, make([]byte, 33), dst); !errors.Is(err, ggml.ErrSize) {
		t.Errorf("short src: %v", err)
	}
	if err := ggml.Dequantize(ggml.Q8_0, make([]byte, 34), dst[:31]); !errors.Is(err, ggml.ErrBlockMultiple) {
		t.Errorf("partial block: %v", err)
	}
	if err := ggml.DequantizeBigEndian(ggml.Q8_0, make([]byte, 34), dst); !errors.Is(err, ggml.ErrUnsupported) {
		t.Errorf("big-endian q8_0: %v", err)
	}
	var te *ggml.TypeError
	if err := ggml.Dequantize(ggml.Q4_K, make([]byte, 10), make([]float32, 256)); !errors.As(err, &te) || te.Type != ggml.Q4_K {
		t.Errorf("error %v is not a *TypeError for q4_K", err)
	}
}

// TestSizesMatchC checks block sizes and bytes against sizeof of ggml's
// block structs.
func TestSizesMatchC(t *testing.T) {
	ref := ggmlref.Build(t)
	sizes := ref.Sizes(t)
	if len(sizes) != len(ggml.Types()) {
		t.Errorf("driver knows %d types, package %d", len(sizes), len(ggml.Types()))
	}
	for _, typ := range ggml.Types() {
		s, ok := sizes[uint32(typ)]
		if !ok || s[0] != typ.BlockSize() || s[1] != typ.TypeSize() {
			t.Errorf("%v: block %d/%d bytes, ggml %v", typ, typ.BlockSize(), typ.TypeSize(), s)
		}
	}
}

// scaleOffsets are the byte offsets of the fp16 scales in each block.
var scaleOffsets = map[ggml.Type][]int{
	ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2},
	ggml.Q8_0: {0}, ggml.Q8_1: {0, 2}, ggml.Q2_K: {80, 82}, ggml.Q3_K: {108},
	ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
	ggml.IQ2_XXS: {0}, ggml.IQ2_XS: {0}, ggml.IQ2_S: {0}, ggml.IQ3_XXS: {0},
	ggml.IQ3_S: {0}, ggml.IQ1_S: {0}, ggml.IQ4_NL: {0}, ggml.IQ4_XS: {0},
	ggml.TQ1_0: {52}, ggml.TQ2_0: {66 - 2},
}

// randomBlocks returns nb random blocks of typ whose scales are finite.
func randomBlocks(r *rand.Rand, typ ggml.Type, nb int) []byte {
	bs := int(typ.TypeSize())
	b := make([]byte, nb*bs)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for k := 0; k < nb; k++ {
		blk := b[k*bs : (k+1)*bs]
		for _, off := range scaleOffsets[typ] {
			for dtype.F16ToF32(uint16(blk[off])|uint16(blk[off+1])<<8) > math.MaxFloat32 || isNaN16(blk[off:]) {
				blk[off+1] = byte(r.Uint32())
			}
		}
		switch typ {
		case ggml.Q8_K:
			for {
				f := math.Float32frombits(r.Uint32())
				if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
					putF32(blk, f)
					break
				}
			}
		case ggml.IQ1_M:
			// The scale's nibbles are the top four bits of the four
			// trailing uint16: keep its exponent below 31.
			for isNaN16(iq1mScale(blk)) || dtype.F16ToF32(le16(iq1mScale(blk))) > math.MaxFloat32 {
				blk[55] = byte(r.Uint32())
			}
		}
	}
	return b
}

func iq1mScale(blk []byte) []byte {
	sc := blk[48:56]
	v := le16(sc[0:])>>12 | (le16(sc[2:])>>8)&0xf0 | (le16(sc[4:])>>4)&0xf00 | le16(sc[6:])&0xf000
	return []byte{byte(v), byte(v >> 8)}
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

func isNaN16(b []byte) bool { return le16(b)&0x7c00 == 0x7c00 }

func putF32(b []byte, f float32) {
	u := math.Float32bits(f)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad < 5 {
				t.Errorf("%s: [%d] = %g (%#08x), ggml %g (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(got))
	}
}

// TestDequantizeMatchesC decodes random blocks of every type with Go and
// with ggml's C and compares bit for bit. Plain types get fully random
// bits (NaNs, infinities, subnormals included).
func TestDequantizeMatchesC(t *testing.T) {
	ref := ggmlref.Build(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, typ := range ggml.Types() {
		if typ == ggml.Q8_1 {
			continue // no dequantizer in ggml; see TestQ8_1
		}
		t.Run(typ.String(), func(t *testing.T) {
			nb := 100 // more than one chunk of the assembly kernels
			if typ.BlockSize() == 1 {
				nb = 4096
			}
			src := randomBlocks(r, typ, nb)
			n := nb * int(typ.BlockSize())
			want := ref.Dequantize(t, uint32(typ), src, n)
			for _, asm := range []bool{true, false} {
				old := ggml.SetAsm(asm)
				got := make([]float32, n)
				err := ggml.Dequantize(typ, src, got)
				ggml.SetAsm(old)
				if err != nil {
					t.Fatal(err)
				}
				sameBits(t, fmt.Sprintf("%v (asm %v)", typ, asm), got, want)
			}
		})
	}
}

// TestF16AllValues decodes every half-precision value against ggml's C.
func TestF16AllValues(t *testing.T) {
	ref := ggmlref.Build(t)
	src := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		src[2*i], src[2*i+1] = byte(i), byte(i>>8)
	}
	for _, typ := range []ggml.Type{ggml.F16, ggml.BF16} {
		got := make([]float32, 1<<16)
		if err := ggml.Dequantize(typ, src, got); err != nil {
			t.Fatal(err)
		}
		sameBits(t, typ.String(), got, ref.Dequantize(t, uint32(typ), src, 1<<16))
	}
}

// TestQ8_1 checks the Q8_1 decoding (qs*d) against Q8_0's on the same
// quants, since ggml has no Q8_1 dequantizer.
func TestQ8_1(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	q1 := randomBlocks(r, ggml.Q8_1, 8)
	q0 := make([]byte, 8*34)
	for k := 0; k < 8; k++ {
		copy(q0[34*k:], q1[36*k:36*k+2])
		copy(q0[34*k+2:], q1[36*k+4:36*k+36])
	}
	a, b := make([]float32, 256), make([]float32, 256)
	if err := ggml.Dequantize(ggml.Q8_1, q1, a); err != nil {
		t.Fatal(err)
	}
	if err := ggml.Dequantize(ggml.Q8_0, q0, b); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "q8_1", a, b)
}

func TestBigEndian(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16, ggml.F64, ggml.I8, ggml.I16, ggml.I32, ggml.I64} {
		le := randomBlocks(r, typ, 100)
		w := int(typ.TypeSize())
		be := make([]byte, len(le))
		for i := 0; i < len(le); i += w {
			for j := 0; j < w; j++ {
				be[i+j] = le[i+w-1-j]
			}
		}
		a, b := make([]float32, 100), make([]float32, 100)
		if err := ggml.Dequantize(typ, le, a); err != nil {
			t.Fatal(err)
		}
		if err := ggml.DequantizeBigEndian(typ, be, b); err != nil {
			t.Fatal(err)
		}
		sameBits(t, typ.String()+" big-endian", b, a)
	}
}

// distributions of quantizer inputs; all finite.
var distributions = []struct {
	name string
	gen  func(r *rand.Rand, i int) float32
}{
	{"normal", func(r *rand.Rand, i int) float32 { return float32(r.NormFloat64()) }},
	{"uniform", func(r *rand.Rand, i int) float32 { return float32(r.Float64()*2 - 1) }},
	{"positive", func(r *rand.Rand, i int) float32 { return float32(r.Float64()*3 + 0.5) }},
	{"zeros", func(r *rand.Rand, i int) float32 { return 0 }},
	{"sparse", func(r *rand.Rand, i int) float32 {
		if r.IntN(8) == 0 {
			return float32(r.NormFloat64())
		}
		return 0
	}},
	{"constant", func(r *rand.Rand, i int) float32 { return 0.75 }},
	{"large", func(r *rand.Rand, i int) float32 { return float32(r.NormFloat64() * 1e6) }},
	{"wide", func(r *rand.Rand, i int) float32 {
		return float32(math.Copysign(math.Pow(10, r.Float64()*12-6), r.Float64()-0.5))
	}},
	{"tiny", func(r *rand.Rand, i int) float32 { return float32(r.NormFloat64() * 1e-6) }},
	{"subnormal", func(r *rand.Rand, i int) float32 { return float32(r.NormFloat64() * 1e-39) }},
	{"halfsteps", func(r *rand.Rand, i int) float32 { return float32(r.IntN(64)-32) * 0.5 }},
	{"f16edges", func(r *rand.Rand, i int) float32 {
		// Values around fp16 rounding and range boundaries.
		e := []float32{65504, 65519.99, 65520, 6.1035156e-05, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 1.0009766, 1.0004883, 1.0014648}
		v := e[r.IntN(len(e))]
		if r.IntN(2) == 0 {
			v = -v
		}
		return v
	}},
}

// TestQuantizeMatchesC quantizes data of several distributions with Go
// (with and without the assembly kernels) and with ggml's reference
// quantizers and compares the bytes.
func TestQuantizeMatchesC(t *testing.T) {
	ref := ggmlref.Build(t)
	for _, typ := range ggml.Types() {
		if !ggml.CanQuantize(typ) {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			for di, dist := range distributions {
				r := rand.New(rand.NewPCG(uint64(typ), uint64(di)))
				x := make([]float32, 64*256)
				for i := range x {
					x[i] = dist.gen(r, i)
				}
				if typ == ggml.IQ4_NL {
					// ggml reads uninitialized levels for a leading
					// all-zero block (see quantIQ4_NL).
					x[0] = 1
				}
				want := ref.Quantize(t, uint32(typ), x)
				for _, asm := range []bool{true, false} {
					got := quantizeAsm(t, typ, x, asm)
					bs := int(typ.TypeSize())
					for k := 0; k < len(got); k += bs {
						if !bytes.Equal(got[k:k+bs], want[k:k+bs]) {
							t.Errorf("%s (asm %v): block %d differs:\n go %x\ngml %x", dist.name, asm, k/bs, got[k:k+bs], want[k:k+bs])
							break
						}
					}
				}
			}
		})
	}
}

// quantizeAsm quantizes x as typ with the assembly kernels on or off.
func quantizeAsm(t *testing.T, typ ggml.Type, x []float32, asm bool) []byte {
	t.Helper()
	n, _ := typ.RowBytes(int64(len(x)))
	got := make([]byte, n)
	old := ggml.SetAsm(asm)
	err := ggml.Quantize(typ, x, got)
	ggml.SetAsm(old)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCanQuantize checks that CanQuantize and Quantize agree, and the
// list of quantizable types (so a type cannot silently drop out of
// TestQuantizeMatchesC).
func TestCanQuantize(t *testing.T) {
	var names []string
	for _, typ := range ggml.Types() {
		n, _ := typ.RowBytes(256)
		err := ggml.Quantize(typ, make([]float32, 256), make([]byte, n))
		if ggml.CanQuantize(typ) != (err == nil) {
			t.Errorf("%v: CanQuantize %v, Quantize error %v", typ, ggml.CanQuantize(typ), err)
		}
		if err != nil && !errors.Is(err, ggml.ErrUnsupported) {
			t.Errorf("%v: Quantize error %v, want ErrUnsupported", typ, err)
		}
		if err == nil {
			names = append(names, typ.String())
		}
	}
	want := "f32 f16 q4_0 q4_1 q5_0 q5_1 q8_0 q8_1 q2_K q3_K q4_K q5_K q6_K q8_K iq4_nl iq4_xs bf16 tq1_0 tq2_0 mxfp4"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("quantizable types:\n got %s\nwant %s", got, want)
	}
}

// TestValidateMatchesC compares Validate with ggml_validate_row_data on
// random blocks whose scales are often NaN or infinite.
func TestValidateMatchesC(t *testing.T) {
	ref := ggmlref.Build(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range ggml.Types() {
		if typ == ggml.Q8_1 {
			continue // ggml rejects the type as a whole
		}
		bs := int(typ.TypeSize())
		nb := 512
		src := make([]byte, nb*bs)
		for i := range src {
			b := byte(r.Uint32())
			if r.IntN(3) == 0 {
				b |= 0x7c // exponent bits of the high byte of fp16, bf16, f32
			}
			if r.IntN(4) == 0 {
				b = 0xff
			}
			src[i] = b
		}
		want := ref.Valid(t, uint32(typ), src, nb)
		nbad := 0
		for i := 0; i < nb; i++ {
			err := ggml.Validate(typ, src[i*bs:(i+1)*bs])
			if (err == nil) != want[i] {
				t.Errorf("%v block %d (%x): Validate %v, ggml valid %v", typ, i, src[i*bs:(i+1)*bs], err, want[i])
			}
			if err != nil {
				nbad++
				if !errors.Is(err, ggml.ErrNonFinite) {
					t.Errorf("%v: error %v", typ, err)
				}
			}
		}
		if nbad == 0 && typ != ggml.I8 && typ != ggml.I16 && typ != ggml.I32 && typ != ggml.I64 {
			t.Errorf("%v: no invalid block among %d: the test checks nothing", typ, nb)
		}
	}
	if err := ggml.Validate(ggml.Q4_K, make([]byte, 145)); !errors.Is(err, ggml.ErrSize) {
		t.Errorf("Validate of 145 bytes of q4_K: %v", err)
	}
}

// TestHalfFromF32Sampled converts 2^22 float32 bit patterns spread over
// the whole space (NaNs, infinities, subnormals, both signs) to F16 and
// BF16 with Go and ggml's C.
func TestHalfFromF32Sampled(t *testing.T) {
	ref := ggmlref.Build(t)
	const n = 1 << 22
	x := make([]float32, n)
	for i := range x {
		x[i] = math.Float32frombits(uint32(i)*1021 + uint32(i>>11))
	}
	for _, typ := range []ggml.Type{ggml.F16, ggml.BF16} {
		got := make([]byte, 2*n)
		if err := ggml.Quantize(typ, x, got); err != nil {
			t.Fatal(err)
		}
		want := ref.Quantize(t, uint32(typ), x)
		for i := 0; i < n; i++ {
			if got[2*i] != want[2*i] || got[2*i+1] != want[2*i+1] {
				t.Fatalf("%v of %#08x: %02x%02x, ggml %02x%02x", typ, math.Float32bits(x[i]), got[2*i+1], got[2*i], want[2*i+1], want[2*i])
			}
		}
		// F32ToF16 / F32ToBF16 agree with the row code.
		for i := 0; i < n; i += 97 {
			h := dtype.F32ToF16(x[i])
			if typ == ggml.BF16 {
				h = dtype.F32ToBF16Quiet(x[i])
			}
			if byte(h) != want[2*i] || byte(h>>8) != want[2*i+1] {
				t.Fatalf("%v scalar conversion of %#08x differs", typ, math.Float32bits(x[i]))
			}
		}
	}
}

// TestNoAllocs checks that Dequantize, Quantize and a passing Validate
// allocate nothing (after the F16 table is built).
func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range ggml.Types() {
		nb := 1 << 16 / int(typ.BlockSize()) // reaches the F16 table path
		if nb == 0 {
			nb = 1
		}
		src := randomBlocks(r, typ, nb)
		dst := make([]float32, nb*int(typ.BlockSize()))
		_ = ggml.Dequantize(typ, src, dst) // builds the F16 table
		if a := testing.AllocsPerRun(3, func() { _ = ggml.Dequantize(typ, src, dst) }); a != 0 {
			t.Errorf("Dequantize %v: %v allocations", typ, a)
		}
		if ggml.CanQuantize(typ) {
			if a := testing.AllocsPerRun(3, func() { _ = ggml.Quantize(typ, dst, src) }); a != 0 {
				t.Errorf("Quantize %v: %v allocations", typ, a)
			}
		}
		if ggml.Validate(typ, src) != nil {
			continue // random plain values include NaNs; errors allocate
		}
		if a := testing.AllocsPerRun(3, func() { _ = ggml.Validate(typ, src) }); a != 0 {
			t.Errorf("Validate %v: %v allocations", typ, a)
		}
	}
}
