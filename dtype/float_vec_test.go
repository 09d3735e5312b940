package dtype

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"testing"
)

// TestFloat32SlicesVector: DecodeFloat32 and EncodeFloat32 (the vector
// kernels for bfloat16 and float16 where the CPU has them, on lengths
// with and without a remainder of 16) give ToFloat32's and PutFloat32's
// bits per element: every bfloat16 pattern decoded; float32s on both
// sides of every rounding boundary (ties to even and odd, NaNs with
// payloads, infinities, subnormals, values rounding up to infinity) and
// random ones encoded.
func TestFloat32SlicesVector(t *testing.T) {
	le := binary.LittleEndian
	var us []uint32
	for h := uint32(0); h < 1<<16; h++ {
		for _, lo := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff} {
			us = append(us, h<<16|lo)
		}
	}
	rng := rand.New(rand.NewSource(3))
	for range 1 << 16 {
		us = append(us, rng.Uint32())
	}
	fs := make([]float32, len(us))
	for i, u := range us {
		fs[i] = math.Float32frombits(u)
	}
	for _, d := range []DType{BFloat16, Float16, Float32} {
		for _, n := range []int{1, 15, 16, 17, 100, 256} {
			for lo := 0; lo+n <= len(fs); lo += n * 7 {
				src := fs[lo : lo+n]
				want := make([]byte, n*d.Size())
				for i, f := range src {
					PutFloat32(d, want[i*d.Size():], f)
				}
				got := make([]byte, len(want))
				EncodeFloat32(d, got, src)
				if !bytes.Equal(got, want) {
					t.Fatalf("%s encode of %d from %d: % x, want % x", d, n, lo, got, want)
				}
				wantF := make([]float32, n)
				for i := range wantF {
					wantF[i] = ToFloat32(d, want[i*d.Size():])
				}
				gotF := make([]float32, n)
				DecodeFloat32(d, gotF, want)
				for i := range gotF {
					if math.Float32bits(gotF[i]) != math.Float32bits(wantF[i]) {
						t.Fatalf("%s decode of %x: %x, want %x", d, want[i*d.Size():(i+1)*d.Size()], math.Float32bits(gotF[i]), math.Float32bits(wantF[i]))
					}
				}
			}
		}
	}
	// Every bfloat16 pattern decodes to itself shifted.
	all := make([]byte, 2<<16)
	for h := range 1 << 16 {
		le.PutUint16(all[2*h:], uint16(h))
	}
	got := make([]float32, 1<<16)
	DecodeFloat32(BFloat16, got, all)
	for h, f := range got {
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("bfloat16 %04x decoded to %08x", h, math.Float32bits(f))
		}
	}
}
