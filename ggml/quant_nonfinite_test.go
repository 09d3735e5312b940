package ggml_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/internal/ggmlref"
)

// TestQuantizeNonFiniteMatchesC quantizes data with 3 in 64 values
// infinite or NaN: where ggml's C is undefined (float to int of
// NaN/inf) the Go emulates x86-64, so the bytes must still match there.
func TestQuantizeNonFiniteMatchesC(t *testing.T) {
	ref := ggmlref.Build(t)
	for _, typ := range ggml.Types() {
		if !ggml.CanQuantize(typ) {
			continue
		}
		r := rand.New(rand.NewPCG(uint64(typ), 99))
		x := make([]float32, 64*256)
		for i := range x {
			switch r.IntN(64) {
			case 0:
				x[i] = float32(math.Inf(1))
			case 1:
				x[i] = float32(math.Inf(-1))
			case 2:
				x[i] = float32(math.NaN())
			default:
				x[i] = float32(r.NormFloat64())
			}
		}
		want := ref.Quantize(t, uint32(typ), x)
		for _, asm := range []bool{true, false} {
			got := quantizeAsm(t, typ, x, asm)
			if bytes.Equal(got, want) {
				continue
			}
			bs := int(typ.TypeSize())
			nb := 0
			for k := 0; k < len(got); k += bs {
				if !bytes.Equal(got[k:k+bs], want[k:k+bs]) {
					nb++
				}
			}
			t.Errorf("%v (asm %v): %d of %d blocks differ", typ, asm, nb, len(got)/bs)
		}
	}
}

// TestDequantizeRawMatchesC decodes fully random blocks (NaN and
// infinite scales included) with Go, with and without the assembly, and
// with ggml's C.
func TestDequantizeRawMatchesC(t *testing.T) {
	ref := ggmlref.Build(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, typ := range ggml.Types() {
		if typ == ggml.Q8_1 {
			continue
		}
		nb := 200
		src := make([]byte, nb*int(typ.TypeSize()))
		for i := range src {
			src[i] = byte(r.Uint32())
		}
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
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Errorf("%v (asm %v) [%d]: %#08x, ggml %#08x", typ, asm, i, math.Float32bits(got[i]), math.Float32bits(want[i]))
					break
				}
			}
		}
	}
}
