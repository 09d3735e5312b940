package ggml_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/internal/ggmlref"
)

// benchElems is the element count of one benchmark pass (4 MiB of float32).
const benchElems = 1 << 20

func benchData(typ ggml.Type) ([]float32, []byte) {
	r := rand.New(rand.NewPCG(7, 8))
	x := make([]float32, benchElems)
	for i := range x {
		x[i] = float32(r.Float64()*2 - 1)
	}
	n, _ := typ.RowBytes(benchElems)
	q := make([]byte, n)
	if ggml.CanQuantize(typ) {
		if err := ggml.Quantize(typ, x, q); err != nil {
			panic(err)
		}
	} else {
		q = randomBlocks(r, typ, benchElems/int(typ.BlockSize()))
	}
	return x, q
}

// BenchmarkDequantize decodes 1 Mi elements per op; SetBytes counts the
// float32 output.
func BenchmarkDequantize(b *testing.B) {
	for _, typ := range ggml.Types() {
		b.Run(typ.String(), func(b *testing.B) {
			x, q := benchData(typ)
			b.SetBytes(4 * benchElems)
			for b.Loop() {
				if err := ggml.Dequantize(typ, q, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize encodes 1 Mi elements per op; SetBytes counts the
// float32 input.
func BenchmarkQuantize(b *testing.B) {
	for _, typ := range ggml.Types() {
		if !ggml.CanQuantize(typ) {
			continue
		}
		b.Run(typ.String(), func(b *testing.B) {
			x, q := benchData(typ)
			b.SetBytes(4 * benchElems)
			for b.Loop() {
				if err := ggml.Quantize(typ, x, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVsC times Go against ggml's reference C, compiled -O3 (as in
// ggml's release builds; gcc vectorizes the simple loops) and -O2, best
// of 10 passes over 16 MiB of float32 each, and reports ns per element
// and the ratios go/c (below 1: Go is faster).
func BenchmarkVsC(b *testing.B) {
	ref := ggmlref.BuildBench(b)
	ref2 := ggmlref.Build(b)
	for _, c := range []struct {
		op  string
		typ ggml.Type
	}{
		{"deq", ggml.Q4_K}, {"deq", ggml.Q8_0}, {"deq", ggml.Q6_K}, {"deq", ggml.F16},
		{"q", ggml.Q8_0}, {"q", ggml.Q4_0}, {"q", ggml.F16}, {"q", ggml.Q4_K}, {"q", ggml.Q6_K},
	} {
		b.Run(c.op+"_"+c.typ.String(), func(b *testing.B) {
			secs, n := ref.Bench(b, c.op, uint32(c.typ), 16, 10)
			cNs := secs * 1e9 / float64(n)
			secs, n = ref2.Bench(b, c.op, uint32(c.typ), 16, 10)
			c2Ns := secs * 1e9 / float64(n)
			x, q := benchData(c.typ)
			b.SetBytes(4 * benchElems)
			b.ResetTimer()
			for b.Loop() {
				var err error
				if c.op == "deq" {
					err = ggml.Dequantize(c.typ, q, x)
				} else {
					err = ggml.Quantize(c.typ, x, q)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			goNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / benchElems
			b.ReportMetric(cNs, "c-O3-ns/elem")
			b.ReportMetric(c2Ns, "c-O2-ns/elem")
			b.ReportMetric(goNs, "go-ns/elem")
			b.ReportMetric(goNs/cNs, "go/c-O3")
			b.ReportMetric(goNs/c2Ns, "go/c-O2")
		})
	}
}
