package dtype

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// castInputs returns float32 bit patterns that exercise every rounding
// case: each sign, exponent and top 10 mantissa bits with the dropped low
// bits at every boundary of bfloat16's and half's roundings (ties, one
// either side), the special values, and random patterns.
func castInputs() []uint32 {
	var in []uint32
	for top := uint32(0); top < 1<<19; top += 3 {
		for _, low := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xfff, 0x1000, 0x1001, 0x1fff} {
			in = append(in, top<<13|low)
		}
	}
	specials := []uint32{
		0, 0x80000000, // ±0
		1, 0x80000001, 0x007fffff, 0x807fffff, 0x00008000, 0x00018000, // float32 subnormals, bf16 ties among them
		0x7f800000, 0xff800000, // ±Inf
		0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7fa12345, 0xffffffff, 0x7fbfffff, // NaN payloads, signalling and quiet
		0x7f7fffff, 0xff7fffff, 0x7f7f8000, 0x7f7f7fff, // max finite: rounds to Inf in bf16 at the tie
		0x477fe000, 0x477fefff, 0x477ff000, 0x47800000, 0xc77ff000, // half's max finite 65504, the tie to Inf at 65520, overflow
		0x33000000, 0x33000001, 0x387fc000, 0x38800000, 0x33800000, // half's subnormals, the smallest, ties to 0
		0x3f808000, 0x3f818000, 0x3f800001, // bf16 ties to even, up and down
	}
	in = append(in, specials...)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 1 << 16 {
		in = append(in, rng.Uint32())
	}
	return in
}

func f32Bytes(u []uint32) []byte {
	b := make([]byte, 4*len(u))
	for i, v := range u {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// TestCastBytes: the float32 to bfloat16 and float16 casts, vector and
// portable, give the bits of F32ToBF16 and F32ToF16 for every input, at
// every length and alignment (the vector kernels take groups of 16).
func TestCastBytes(t *testing.T) {
	in := castInputs()
	src := f32Bytes(in)
	for _, tc := range []struct {
		name      string
		fast, go_ Caster
		ref       func(float32) uint16
	}{
		{"bf16", CastBytes(Float32, BFloat16), castF32ToBF16Go, F32ToBF16},
		{"f16", CastBytes(Float32, Float16), castF32ToF16Go, F32ToF16},
	} {
		for _, skip := range []int{0, 1, 5, 17} {
			s := src[4*skip:]
			s = s[:len(s)-4*skip] // odd lengths and offsets
			n := len(s) / 4
			for name, fn := range map[string]Caster{"fast": tc.fast, "go": tc.go_} {
				dst := make([]byte, 2*n+2)
				dst[2*n], dst[2*n+1] = 0xaa, 0x55
				fn(dst[:2*n], s)
				if dst[2*n] != 0xaa || dst[2*n+1] != 0x55 {
					t.Fatalf("%s %s: wrote past the end", tc.name, name)
				}
				for i := range n {
					u := in[skip+i]
					got := binary.LittleEndian.Uint16(dst[2*i:])
					if want := tc.ref(math.Float32frombits(u)); got != want {
						t.Fatalf("%s %s: %#08x -> %#04x, want %#04x", tc.name, name, u, got, want)
					}
				}
			}
		}
	}
	bf16, f16 := vectorCasts()
	t.Logf("vector kernels: bf16 %v, f16 %v", bf16, f16)
}

// TestCastBF16ToF32: every bfloat16 pattern widens to BF16ToF32's bits,
// vector and portable.
func TestCastBF16ToF32(t *testing.T) {
	src := make([]byte, 2*(1<<16)+6)
	for h := range 1<<16 + 3 {
		binary.LittleEndian.PutUint16(src[2*h:], uint16(h))
	}
	for _, skip := range []int{0, 3} {
		s := src[2*skip:]
		n := len(s) / 2
		for name, fn := range map[string]Caster{"fast": CastBytes(BFloat16, Float32), "go": castBF16ToF32Go} {
			dst := make([]byte, 4*n)
			fn(dst, s)
			for i := range n {
				h := binary.LittleEndian.Uint16(s[2*i:])
				if got := binary.LittleEndian.Uint32(dst[4*i:]); got != math.Float32bits(BF16ToF32(h)) {
					t.Fatalf("%s: %#04x -> %#08x", name, h, got)
				}
			}
		}
	}
	if CastBytes(Float16, Float32) != nil || CastBytes(Float64, BFloat16) != nil {
		t.Error("a direct cast for a pair without one")
	}
}

func benchCast(b *testing.B, fn Caster, from, to int) {
	const n = 1 << 16 // 256 KiB of float32: in cache, as convert's chunks are
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]byte, n*from)
	for i := range n {
		if from == 4 {
			binary.LittleEndian.PutUint32(src[4*i:], math.Float32bits(float32(rng.NormFloat64())))
		} else {
			binary.LittleEndian.PutUint16(src[2*i:], uint16(rng.Uint32()))
		}
	}
	dst := make([]byte, n*to)
	b.SetBytes(int64(n * from))
	b.ResetTimer()
	for range b.N {
		fn(dst, src)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
}

// The old path: DecodeFloat32 then EncodeFloat32 through a float32 slice.
func viaFloat32(from, to DType) Caster {
	mid := make([]float32, 1<<16)
	return func(dst, src []byte) {
		n := len(src) / from.Size()
		DecodeFloat32(from, mid[:n], src)
		EncodeFloat32(to, dst, mid[:n])
	}
}

func BenchmarkCastF32ToBF16(b *testing.B)    { benchCast(b, CastBytes(Float32, BFloat16), 4, 2) }
func BenchmarkCastF32ToBF16Go(b *testing.B)  { benchCast(b, castF32ToBF16Go, 4, 2) }
func BenchmarkCastF32ToBF16Old(b *testing.B) { benchCast(b, viaFloat32(Float32, BFloat16), 4, 2) }
func BenchmarkCastF32ToF16(b *testing.B)     { benchCast(b, CastBytes(Float32, Float16), 4, 2) }
func BenchmarkCastF32ToF16Go(b *testing.B)   { benchCast(b, castF32ToF16Go, 4, 2) }
func BenchmarkCastF32ToF16Old(b *testing.B)  { benchCast(b, viaFloat32(Float32, Float16), 4, 2) }
func BenchmarkCastBF16ToF32(b *testing.B)    { benchCast(b, CastBytes(BFloat16, Float32), 2, 4) }
func BenchmarkCastBF16ToF32Go(b *testing.B)  { benchCast(b, castBF16ToF32Go, 2, 4) }
func BenchmarkCastBF16ToF32Old(b *testing.B) { benchCast(b, viaFloat32(BFloat16, Float32), 2, 4) }

// nearestBF16 is the bfloat16 of the float32 with bits u by the rule
// itself, not by the bias trick of F32ToBF16: of the two bfloat16 values
// either side of it (its bits truncated, and the next), the nearer in
// float64 arithmetic (exact for these), the even one on a tie, with
// Inf standing for 2^128 as IEEE 754 rounds past the largest finite
// value. Subnormals take no special case: bfloat16 has float32's
// exponent range, so their neighbours are subnormals too. Every NaN is
// 0x7fc0, the package's choice (c10::BFloat16's scalar rounding; torch's
// vectorized CPU cast, 1.13 and 2.6, makes every NaN 0xffff).
func nearestBF16(u uint32) uint16 {
	sign := uint16(u>>16) & 0x8000
	mag := u & 0x7fffffff
	if mag > 0x7f800000 {
		return 0x7fc0
	}
	lo := uint16(mag >> 16)
	if mag&0xffff == 0 {
		return sign | lo
	}
	value := func(h uint16) float64 {
		if h == 0x7f80 {
			return math.Ldexp(1, 128)
		}
		return float64(math.Float32frombits(uint32(h) << 16))
	}
	x := float64(math.Float32frombits(mag))
	below, above := x-value(lo), value(lo+1)-x
	if above < below || above == below && lo&1 == 1 {
		lo++
	}
	return sign | lo
}

// TestNearestBF16: the oracle itself on values worked by hand.
func TestNearestBF16(t *testing.T) {
	for _, c := range []struct {
		u    uint32
		want uint16
	}{
		{0x3f800000, 0x3f80}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82}, {0x3f808001, 0x3f81}, // ties to even
		{0xbf818000, 0xbf82}, {0x80000000, 0x8000}, {0x00008000, 0x0000}, {0x00018000, 0x0002}, // signs, subnormal ties
		{0x00008001, 0x0001}, {0x007fffff, 0x0080}, // subnormals round up, into the normals
		{0x7f7fffff, 0x7f80}, {0x7f7f8000, 0x7f80}, {0x7f7f7fff, 0x7f7f}, {0xff7f8000, 0xff80}, // past the largest finite: Inf
		{0x7f800000, 0x7f80}, {0xffc00001, 0x7fc0}, {0x7f800001, 0x7fc0},
	} {
		if got := nearestBF16(c.u); got != c.want {
			t.Errorf("%#08x: %#04x, want %#04x", c.u, got, c.want)
		}
	}
}
