package ggml_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/internal/ggmlref"
)

// q8Blocks builds Q8_0 inputs block by block: each generator fills one
// block of 32. The cases aim at what the assembly kernel must get right
// or hand back to Go: ties at .5, subnormals, magnitudes near
// MaxFloat32, fp16 edges of the scale, and NaN or infinity at every
// position of a block, between ordinary blocks so the kernel restarts
// mid-row.
func q8Blocks(r *rand.Rand) []float32 {
	finite := func() float32 {
		for {
			f := math.Float32frombits(r.Uint32())
			if !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) {
				return f
			}
		}
	}
	normal := func(x []float32) {
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
	}
	var gens []func(x []float32)
	// Ties: with amax 127 (d 1, id 1) the quants are x itself, k+0.5;
	// with amax 254 (d 2, id 0.5) odd integers halve to k+0.5.
	for _, amax := range []float32{127, 254, -127, -254} {
		gens = append(gens, func(x []float32) {
			s := amax / 127
			for j := range x {
				x[j] = s * (float32(r.IntN(254)-127) + 0.5)
			}
			x[r.IntN(32)] = amax
		})
	}
	gens = append(gens,
		// Fully random finite bits: subnormals up to MaxFloat32 in one block.
		func(x []float32) {
			for j := range x {
				x[j] = finite()
			}
		},
		// One random exponent per block (all 254 finite ones over the
		// test): scales from subnormal through fp16-subnormal to fp16 Inf.
		func(x []float32) {
			e := uint32(r.IntN(255))
			for j := range x {
				x[j] = math.Float32frombits(e<<23 | r.Uint32()&0x807fffff)
			}
		},
		// Subnormals only (1/d overflows: the Go path).
		func(x []float32) {
			for j := range x {
				x[j] = math.Float32frombits(r.Uint32() & 0x807fffff)
			}
		},
		// Zeros of both signs.
		func(x []float32) {
			for j := range x {
				x[j] = float32(math.Copysign(0, float64(r.IntN(2)*2-1)))
			}
		},
		// amax at fp16 edges of d = amax/127.
		func(x []float32) {
			edges := []float32{65504, 65519.99, 65520, 6.1035156e-05, 6.097555e-05, 5.9604645e-08, 2.9802322e-08, math.MaxFloat32, math.SmallestNonzeroFloat32}
			normal(x)
			m := edges[r.IntN(len(edges))] * 127
			if math.IsInf(float64(m), 0) {
				m = math.MaxFloat32
			}
			for j := range x {
				x[j] *= m / 4
			}
			x[r.IntN(32)] = m
		},
	)
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for pos := range 32 {
			gens = append(gens, func(x []float32) {
				normal(x)
				x[pos] = bad
			})
		}
	}
	var out []float32
	for range 40 {
		for _, g := range gens {
			x := make([]float32, 32)
			g(x)
			out = append(out, x...)
			normal(x) // an ordinary block after each
			out = append(out, x...)
		}
	}
	return out
}

// TestQuantizeQ8_0EdgesMatchesC quantizes q8Blocks with ggml's C and
// with Go, the assembly kernel on and off, from an aligned and an
// unaligned start, and compares the bytes block by block.
func TestQuantizeQ8_0EdgesMatchesC(t *testing.T) {
	ref := ggmlref.Build(t)
	x := q8Blocks(rand.New(rand.NewPCG(35, 8)))
	want := ref.Quantize(t, uint32(ggml.Q8_0), x)
	// The same floats one element off 16-byte alignment.
	buf := make([]float32, len(x)+1)
	copy(buf[1:], x)
	for _, asm := range []bool{true, false} {
		for _, src := range [][]float32{x, buf[1:]} {
			got := quantizeAsm(t, ggml.Q8_0, src, asm)
			bad := 0
			for k := 0; k < len(got); k += 34 {
				if !bytes.Equal(got[k:k+34], want[k:k+34]) {
					if bad < 3 {
						t.Errorf("asm %v: block %d of %v:\n go %x\ngml %x", asm, k/34, x[k/34*32:k/34*32+32], got[k:k+34], want[k:k+34])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("asm %v: %d of %d blocks differ", asm, bad, len(got)/34)
			}
		}
	}
}

// TestQuantizeQ8_0Ties checks the premise of the tie cases of q8Blocks
// against the C's output: the rounding of halves away from zero shows in
// the quants (a test of the test: with no tie reached, the case above
// would check nothing).
func TestQuantizeQ8_0Ties(t *testing.T) {
	ref := ggmlref.Build(t)
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j) - 16.5 // -16.5 .. 14.5
	}
	x[31] = 127
	q := ref.Quantize(t, uint32(ggml.Q8_0), x)
	if q[0] != 0x00 || q[1] != 0x3c { // d = 1
		t.Fatalf("d = %x, want fp16 1.0", q[:2])
	}
	for j := 0; j < 31; j++ {
		want := int8(j - 16) // -16.5 -> -17 ... 0.5 -> 1: away from zero
		if x[j] < 0 {
			want = int8(j - 17)
		}
		if int8(q[2+j]) != want {
			t.Errorf("C quantizes %v to %d, want %d", x[j], int8(q[2+j]), want)
		}
	}
}

// TestQ8KernelCoverage checks that the assembly kernel does ordinary
// blocks itself and stops exactly before the first block it leaves to Go,
// and that what it did equals Go's bytes. (Quantize hands a block the
// kernel gets wrong to Go whenever a quant is out of range, so the
// comparisons above cannot see a kernel that gives up on everything.)
func TestQ8KernelCoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 9))
	const nb = 64
	x := make([]float32, 32*nb)
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(20)-10)))
	}
	got := make([]byte, 34*nb)
	if n := ggml.Q8Kernel(x, got); n == -1 {
		t.Skip("no assembly kernel on this platform")
	} else if n != nb {
		t.Fatalf("kernel did %d of %d ordinary blocks", n, nb)
	}
	if !bytes.Equal(got, quantizeAsm(t, ggml.Q8_0, x, false)) {
		t.Errorf("kernel bytes differ from Go's")
	}
	stop := []struct {
		name string
		set  func(b []float32)
	}{
		{"nan", func(b []float32) { b[r.IntN(32)] = float32(math.NaN()) }},
		{"inf", func(b []float32) { b[r.IntN(32)] = float32(math.Inf(-1)) }},
		{"zeros", func(b []float32) { clear(b) }},
		{"subnormal", func(b []float32) {
			for j := range b {
				b[j] = math.Float32frombits(r.Uint32() & 0x807fffff)
			}
		}},
	}
	for _, c := range stop {
		y := append([]float32(nil), x...)
		k := 1 + r.IntN(nb-1)
		c.set(y[32*k : 32*k+32])
		if n := ggml.Q8Kernel(y, got); n != k {
			t.Errorf("%s in block %d: kernel stopped after %d blocks", c.name, k, n)
		}
	}
}
