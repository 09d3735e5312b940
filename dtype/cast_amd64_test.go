//go:build amd64 && !purego

package dtype

import (
	"encoding/binary"
	"math"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestCastPaths forces each float32 to bfloat16 path through the package
// switches (AVX-512 where this CPU has it, AVX2, the portable loop) and
// compares every output with nearestBF16: every exponent and sign, ties
// and their neighbours, subnormals, NaN payloads, ±Inf, ±0, the largest
// finite values rounding to Inf, random patterns; at lengths and offsets
// that leave every kind of tail (groups of 32, of 16, single elements),
// through CastBytes and through EncodeFloat32.
func TestCastPaths(t *testing.T) {
	in := castInputs()
	src := f32Bytes(in)
	floats := make([]float32, len(in))
	for i, u := range in {
		floats[i] = math.Float32frombits(u)
	}
	want := make([]uint16, len(in))
	for i, u := range in {
		want[i] = nearestBF16(u)
	}
	old512, old2 := useAVX512, useAVX2
	defer func() { useAVX512, useAVX2 = old512, old2 }()
	for _, p := range []struct {
		name         string
		avx512, avx2 bool
		needs        bool
	}{
		{"avx512", true, true, cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW},
		{"avx2", false, true, cpu.X86.HasAVX2},
		{"portable", false, false, true},
	} {
		if !p.needs {
			t.Logf("%s: this CPU lacks it", p.name)
			continue
		}
		useAVX512, useAVX2 = p.avx512, p.avx2
		for _, skip := range []int{0, 1, 16, 17, 31} {
			n := len(in) - 2*skip - 7*skip%32
			s := src[4*skip : 4*(skip+n)]
			dst := make([]byte, 2*n+2)
			dst[2*n], dst[2*n+1] = 0xaa, 0x55
			CastBytes(Float32, BFloat16)(dst[:2*n], s)
			enc := make([]byte, 2*n)
			EncodeFloat32(BFloat16, enc, floats[skip:skip+n])
			if dst[2*n] != 0xaa || dst[2*n+1] != 0x55 {
				t.Fatalf("%s: wrote past the end", p.name)
			}
			for i := range n {
				w := want[skip+i]
				if got := binary.LittleEndian.Uint16(dst[2*i:]); got != w {
					t.Fatalf("%s, offset %d: %#08x -> %#04x, want %#04x", p.name, skip, in[skip+i], got, w)
				}
				if got := binary.LittleEndian.Uint16(enc[2*i:]); got != w {
					t.Fatalf("%s, EncodeFloat32, offset %d: %#08x -> %#04x, want %#04x", p.name, skip, in[skip+i], got, w)
				}
			}
		}
	}
}

// benchForced runs benchCast with the float32 to bfloat16 switches set.
func benchForced(b *testing.B, avx512, avx2 bool) {
	if avx512 && !(cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW) || avx2 && !cpu.X86.HasAVX2 {
		b.Skip("this CPU lacks the kernel")
	}
	old512, old2 := useAVX512, useAVX2
	defer func() { useAVX512, useAVX2 = old512, old2 }()
	useAVX512, useAVX2 = avx512, avx2
	benchCast(b, CastBytes(Float32, BFloat16), 4, 2)
}

func BenchmarkCastF32ToBF16AVX512(b *testing.B) { benchForced(b, true, true) }
func BenchmarkCastF32ToBF16AVX2(b *testing.B)   { benchForced(b, false, true) }
