package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// memST returns a safetensors file in memory holding float32 tensors
// model.layers.I.w of the given values.
func memST(t testing.TB, tensors [][]float32) *statedict.Checkpoint {
	raw := make([][]byte, len(tensors))
	for i, v := range tensors {
		for _, f := range v {
			raw[i] = binary.LittleEndian.AppendUint32(raw[i], math.Float32bits(f))
		}
	}
	return memSTRaw(t, "F32", 4, raw)
}

// memSTRaw returns a safetensors file in memory holding tensors
// model.layers.I.w of dtype (elements of size bytes) with the given bytes.
func memSTRaw(t testing.TB, dtype string, size int, tensors [][]byte) *statedict.Checkpoint {
	t.Helper()
	hdr := map[string]any{}
	var off int64
	for i, v := range tensors {
		hdr[fmt.Sprintf("model.layers.%d.w", i)] = map[string]any{"dtype": dtype, "shape": []int{len(v) / size}, "data_offsets": []int64{off, off + int64(len(v))}}
		off += int64(len(v))
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	buf = append(buf, h...)
	for _, v := range tensors {
		buf = append(buf, v...)
	}
	ck, err := statedict.NewReader(bytes.NewReader(buf), int64(len(buf)))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// BenchmarkDiff: two checkpoints of 8 float32 tensors of 2^21 elements
// (64 MiB a side), every other tensor perturbed, as bench/diff.sh's.
func BenchmarkDiff(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	var ta, tb [][]float32
	for i := range 8 {
		va, vb := make([]float32, 1<<21), make([]float32, 1<<21)
		for j := range va {
			va[j] = float32(rng.NormFloat64())
			vb[j] = va[j]
			if i%2 == 1 {
				vb[j] += float32(1e-3 * rng.NormFloat64())
			}
		}
		ta, tb = append(ta, va), append(tb, vb)
	}
	a, c := memST(b, ta), memST(b, tb)
	b.SetBytes(2 * 8 << 23)
	b.ResetTimer()
	for range b.N {
		if _, err := Diff(context.Background(), a, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAddF32: the statistics of 2^20 differing float32 pairs.
func BenchmarkAddF32(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	x, y := make([]float32, 1<<20), make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		y[i] = x[i] + float32(1e-3*rng.NormFloat64())
	}
	b.SetBytes(8 << 20)
	var h f32Kernel
	for range b.N {
		var s acc
		s.addF32(x, y, tolerance{}, &h)
	}
}

// BenchmarkAdd: add on BenchmarkAddF32's pairs, as float64.
func BenchmarkAdd(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	x, y := make([]float64, 1<<20), make([]float64, 1<<20)
	for i := range x {
		x[i] = float64(float32(rng.NormFloat64()))
		y[i] = float64(float32(x[i] + 1e-3*rng.NormFloat64()))
	}
	b.SetBytes(8 << 20)
	for range b.N {
		var s acc
		s.add(x, y, tolerance{})
	}
}

// BenchmarkAddF32Go: BenchmarkAddF32 with the Go kernel only.
func BenchmarkAddF32Go(b *testing.B) {
	defer setKernels("go")()
	BenchmarkAddF32(b)
}

// BenchmarkAddF32AVX2: BenchmarkAddF32 with the AVX2 kernel.
func BenchmarkAddF32AVX2(b *testing.B) {
	if !hasVec {
		b.Skip("no AVX2")
	}
	defer setKernels("avx2")()
	BenchmarkAddF32(b)
}
