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
		math.Float32frombits(0xffc00001), math.Float32frombits(0x7fc02000), math.Float32frombits(0x7f800001),
		1.0/448, 3.0517578e-05, 65504.0/448, 65520.0/448)
}

// fp8Paths runs f with each kernel path the CPU has forced in turn:
// AVX-512, AVX2 alone, portable alone.
func fp8Paths(t *testing.T, f func(t *testing.T, path string)) {
	v, h, w := haveFP8Vec, haveF16C, haveFP8Vec512
	defer func() { haveFP8Vec, haveF16C, haveFP8Vec512 = v, h, w }()
	if w {
		f(t, "avx512")
	}
	haveFP8Vec512 = false
	if v {
		f(t, "avx2")
	}
	haveFP8Vec, haveF16C = false, false
	f(t, "portable")
}

// fp8Want is the table path's bytes for code b times s in o's dtype: the
// code's float32 from dtype.Float8ToFloat64, the float32 product,
// dtype.F32ToBF16 or dtype.F32ToF16. A product of two NaNs is the code's
// (x86 keeps the first operand's; Go's compiler may put either first in
// an expression, so the rule is spelled out here).
func fp8Want(lut *[256]float32, o fp8Out, b byte, s float32) []byte {
	v := lut[b] * s
	if c := lut[b]; c != c {
		v = c
	}
	out := make([]byte, o.size())
	switch o {
	case fp8ToBF16:
		binary.LittleEndian.PutUint16(out, dtype.F32ToBF16(v))
	case fp8ToF16:
		binary.LittleEndian.PutUint16(out, dtype.F32ToF16(v))
	default:
		binary.LittleEndian.PutUint32(out, math.Float32bits(v))
	}
	return out
}

var fp8Outs = []fp8Out{fp8ToBF16, fp8ToF16, fp8ToF32}

// TestFP8VecBits: every code of e4m3fn and e5m2 times every scale of
// fp8TestScales (subnormal, overflowing and NaN products among them), to
// bfloat16, float16 and float32, gives the table path's bits through
// fp8Vec and fp8Seg on every kernel path, over lengths that leave ragged
// tails. The codes are laid out so that the finite ones fill whole
// 64-code steps of their own (the AVX-512 kernel's, which leaves a step
// with a NaN product to fp8Vec) and the NaN codes a step apart.
func TestFP8VecBits(t *testing.T) {
	fp8Paths(t, func(t *testing.T, path string) {
		for _, d := range []dtype.DType{dtype.Float8E4M3FN, dtype.Float8E5M2} {
			k, lut := fp8VecConsts(d), f8Tables[d]
			var finite, nan []byte
			for b := 0; b < 256; b++ {
				if v := lut[b]; v != v {
					nan = append(nan, byte(b))
				} else {
					finite = append(finite, byte(b))
				}
			}
			all := append(append(append([]byte{}, finite...), finite[:256-len(finite)]...), nan...)
			for _, n := range []int{len(all), 256, 256 + 13, 64, 15, 1} {
				q := all[:n]
				for _, s := range fp8TestScales() {
					for _, o := range fp8Outs {
						es := o.size()
						got, gotSeg, gotGo := make([]byte, es*n), make([]byte, es*n), make([]byte, es*n)
						fp8Vec(k, o, got, q, s)
						fp8Seg(k, o, gotSeg, q, []float32{s}, n, 0)
						fp8VecGo(k, o, gotGo, q, s)
						for j, b := range q {
							want := fp8Want(lut, o, b, s)
							for name, g := range map[string][]byte{"fp8Vec": got, "fp8Seg": gotSeg, "portable": gotGo} {
								if string(g[es*j:es*j+es]) != string(want) {
									t.Fatalf("%s, %s: %s code %#02x scale %g (%#x) to %d bytes: got % x, want % x",
										path, name, d, b, s, math.Float32bits(s), es, g[es*j:es*j+es], want)
								}
							}
						}
					}
				}
			}
		}
	})
}

// TestFP8Kernel512Takes: with a scale that makes no product special, the
// AVX-512 kernel writes every finite code itself (the fallback is not
// what passes TestFP8VecBits), and it stops at the first step with a NaN
// product, one with a subnormal product, or one whose block's scale is NaN.
func TestFP8Kernel512Takes(t *testing.T) {
	if !haveFP8Vec512 {
		t.Skip("no AVX-512 VBMI/BF16 on this CPU: the kernel is not built for it")
	}
	for _, d := range []dtype.DType{dtype.Float8E4M3FN, dtype.Float8E5M2} {
		k, lut := fp8VecConsts(d), f8Tables[d]
		q := make([]byte, 0, 256)
		for b := 0; len(q) < 256; b = (b + 1) % 256 {
			if v := lut[b]; v == v {
				q = append(q, byte(b))
			}
		}
		for _, o := range fp8Outs {
			out := make([]byte, o.size()*len(q))
			if n := fp8Kernel512(o, out, q, []float32{1, 2, 0.5, 3}, 64, 0, k.t512); n != len(q) {
				t.Fatalf("%s to %d bytes: the kernel took %d of %d finite codes", d, o.size(), n, len(q))
			}
			for j, b := range q {
				want := fp8Want(lut, o, b, []float32{1, 2, 0.5, 3}[j/64])
				if g := out[o.size()*j : o.size()*(j+1)]; string(g) != string(want) {
					t.Fatalf("%s code %#02x to %d bytes: got % x, want % x", d, b, o.size(), g, want)
				}
			}
			nanCode := q[:64:64]
			nanCode = append(append([]byte{}, nanCode[:63]...), 0x7f)
			for name, tc := range map[string]struct {
				q  []byte
				sc []float32
			}{
				"NaN code":         {append(append([]byte{}, q[:128]...), nanCode...), []float32{1, 1, 1}},
				"subnormal":        {q[:192], []float32{1, 1, 0x1p-140}},
				"NaN scale":        {q[:192], []float32{1, 1, float32(math.NaN())}},
				"Inf times zero":   {append(append([]byte{}, q[:128]...), q[:64]...), []float32{1, 1, float32(math.Inf(1))}}, // code 0 in the third step
				"block 2 of 3 NaN": {q[:192], []float32{1, float32(math.NaN()), 1}},
			} {
				want := 128
				if name == "block 2 of 3 NaN" {
					want = 64
				}
				if n := fp8Kernel512(o, make([]byte, o.size()*len(tc.q)), tc.q, tc.sc, 64, 0, k.t512); n != want {
					t.Errorf("%s to %d bytes, %s: the kernel took %d codes, want %d", d, o.size(), name, n, want)
				}
			}
		}
	}
}

// TestFP8SegBlocks: fp8Seg over row segments of several blocks (widths
// that are and are not multiples of 64, segments starting inside a
// block), random codes (NaN codes among them) and per-block scales with
// a NaN and a subnormal-making one, on every path, against the table
// path element by element.
func TestFP8SegBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fp8Paths(t, func(t *testing.T, path string) {
		for _, d := range []dtype.DType{dtype.Float8E4M3FN, dtype.Float8E5M2} {
			k, lut := fp8VecConsts(d), f8Tables[d]
			for _, bw := range []int{128, 64, 192, 100, 1} {
				for _, off := range []int{0, 64 % bw, 37 % bw} {
					n := 7*bw - off + 29
					if bw == 1 {
						n = 300
					}
					q := make([]byte, n)
					for i := range q {
						q[i] = byte(r.Uint32())
						if r.IntN(8) != 0 {
							q[i] &= 0x77 // mostly finite, so that the kernel's steps run
						}
					}
					scales := make([]float32, (off+n+bw-1)/bw)
					for i := range scales {
						scales[i] = float32(math.Ldexp(r.Float64()+0.5, r.IntN(30)-15))
					}
					scales[1%len(scales)] = float32(math.NaN())
					scales[len(scales)/2] = 0x1p-135
					for _, o := range fp8Outs {
						es := o.size()
						got := make([]byte, es*n)
						fp8Seg(k, o, got, q, scales, bw, off)
						for j, b := range q {
							want := fp8Want(lut, o, b, scales[(off+j)/bw])
							if g := got[es*j : es*j+es]; string(g) != string(want) {
								t.Fatalf("%s: %s bw %d off %d, element %d (code %#02x, scale %g) to %d bytes: got % x, want % x",
									path, d, bw, off, j, b, scales[(off+j)/bw], es, g, want)
							}
						}
					}
				}
			}
		}
	})
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
