package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// fp8TestScales: every power of two a float32 has (subnormal products
// and overflow to Inf come out of these), random mantissas, and the
// special values.
func fp8TestScales() []float32 {
	var s []float32
	for e := -149; e <= 127; e++ {
		s = append(s, float32(math.Ldexp(1, e)), -float32(math.Ldexp(1.5, e)))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		s = append(s, math.Float32frombits(r.Uint32()&^0x80000000|uint32(i%2)<<31))
	}
	nan := float32(math.NaN())
	return append(s, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), nan,
		math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001), 1.0/448, 3.0517578e-05)
}

// TestFP8VecBits: the vector kernel, its portable fallback and the table
// path (the code's float32 value from dtype.Float8ToFloat64, times the
// scale, dtype.F32ToBF16) give the same bits for every code of e4m3fn
// and e5m2 with every scale of fp8TestScales, to bfloat16 and float32,
// over lengths that leave a ragged tail and start at odd offsets.
func TestFP8VecBits(t *testing.T) {
	for _, d := range []dtype.DType{dtype.Float8E4M3FN, dtype.Float8E5M2} {
		k := fp8VecConsts(d)
		lut := f8Tables[d]
		for _, n := range []int{256, 256 + 13, 15, 1} {
			for _, off := range []int{0, 3} {
				q := make([]byte, n)
				for i := range q {
					q[i] = byte(i*7 + off) // every code once in each 256
				}
				for _, s := range fp8TestScales() {
					for _, es := range []int{2, 4} {
						want := make([]byte, es*n)
						for j, b := range q {
							v := lut[b] * s
							if es == 2 {
								binary.LittleEndian.PutUint16(want[2*j:], dtype.F32ToBF16(v))
							} else {
								binary.LittleEndian.PutUint32(want[4*j:], math.Float32bits(v))
							}
						}
						got, gotGo := make([]byte, es*n), make([]byte, es*n)
						fp8Vec(k, es, got, q, s)
						fp8VecGo(k, es, gotGo, q, s)
						if err := sameBytes(want, got, es, q); err != nil {
							t.Fatalf("%s scale %g (%#x), %d bytes out, vector: %v", d, s, math.Float32bits(s), es, err)
						}
						if err := sameBytes(want, gotGo, es, q); err != nil {
							t.Fatalf("%s scale %g (%#x), %d bytes out, portable: %v", d, s, math.Float32bits(s), es, err)
						}
					}
				}
			}
		}
	}
}

func sameBytes(want, got []byte, es int, q []byte) error {
	for j := range q {
		w, g := want[es*j:es*j+es], got[es*j:es*j+es]
		if string(w) != string(g) {
			return fmt.Errorf("code %#02x (element %d): got % x, want % x", q[j], j, g, w)
		}
	}
	return nil
}
