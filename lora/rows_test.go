package lora

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// memTensor is a tensor of dt holding vals (rounded to dt), in memory.
func memTensor(name string, dt dtype.DType, shape []int64, vals []float32) *statedict.Tensor {
	b := make([]byte, len(vals)*dt.Size())
	dtype.EncodeFloat32(dt, b, vals)
	return statedict.NewDerivedTensor(name, dt, shape, bytes.NewReader(b), int64(len(b)), nil)
}

// rowsCase builds a base with a linear weight, a second one of another
// shape and an embedding (or, with fifo, Conv1D-style (in, out) weights),
// and n adapters of rank r on all three, adapter i weighted w[i].
func rowsCase(t *testing.T, rng *rand.Rand, dt dtype.DType, r, n int, fifo bool) (*statedict.Checkpoint, *Merger) {
	t.Helper()
	type mod struct {
		name      string
		out, in   int64
		embedding bool
	}
	// out and in are not multiples of the 256-column tile nor of the
	// vector kernel's 64 columns.
	mods := []mod{{"layer.q", 37, 300, false}, {"layer.up", 70, 129, false}, {"embed", 21, 333, true}}
	base := &statedict.Checkpoint{}
	for _, m := range mods {
		shape := []int64{m.out, m.in}
		if m.embedding || fifo { // W (num, dim) / (in, out): B @ A is its transpose
			shape = []int64{m.in, m.out}
		}
		base.Tensors = append(base.Tensors, memTensor(m.name+".weight", dt, shape, randFloats(rng, int(m.out*m.in))))
	}
	var ads []*Adapter
	for i := range n {
		cfg, err := ParseConfig(fmt.Appendf(nil, `{"peft_type":"LORA","r":%d,"lora_alpha":%d,"target_modules":["q","up","embed"],"fan_in_fan_out":%v}`, r, 3*r+i, fifo))
		if err != nil {
			t.Fatal(err)
		}
		ck := &statedict.Checkpoint{}
		for _, m := range mods {
			a, b := "lora_A.weight", "lora_B.weight"
			if m.embedding {
				a, b = "lora_embedding_A", "lora_embedding_B"
			}
			ck.Tensors = append(ck.Tensors,
				memTensor(Prefix+m.name+"."+a, dtype.Float32, []int64{int64(r), m.in}, randFloats(rng, r*int(m.in))),
				memTensor(Prefix+m.name+"."+b, dtype.Float32, []int64{m.out, int64(r)}, randFloats(rng, r*int(m.out))))
		}
		a, err := NewAdapter(fmt.Sprint("a", i), cfg, ck, []float64{0.7, -0.35, 1.25}[i])
		if err != nil {
			t.Fatal(err)
		}
		ads = append(ads, a)
	}
	m, err := Plan(base, ads)
	if err != nil {
		t.Fatal(err)
	}
	return base, m
}

// TestMergeRowsMatchesApply: the fused path (MergeRows: each 256-column
// tile of a row decoded, given every adapter's delta, encoded) gives the
// bytes of the staged one (the tensor decoded whole, Apply, encoded
// whole), for bfloat16, float16 and float32 bases written as themselves
// and cast, ranks 1 to 64, fan_in_fan_out and embeddings, one to three
// weighted adapters, blocks of 1, 3 and 64 rows.
func TestMergeRowsMatchesApply(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(5))
	for _, dt := range []dtype.DType{dtype.BFloat16, dtype.Float16, dtype.Float32} {
		for _, r := range []int{1, 8, 16, 64} {
			for _, n := range []int{1, 3} {
				for _, fifo := range []bool{false, true} {
					base, m := rowsCase(t, rng, dt, r, n, fifo)
					for _, w := range base.Tensors {
						cols := m.RowCols(w)
						if cols == 0 || w.NumEl()%cols != 0 {
							t.Fatalf("%s: RowCols %d", w.Name, cols)
						}
						raw, err := w.ReadAll()
						if err != nil {
							t.Fatal(err)
						}
						for _, to := range []dtype.DType{dt, dtype.BFloat16, dtype.Float32} {
							vals := make([]float32, w.NumEl())
							dtype.DecodeFloat32(dt, vals, raw)
							if err := m.Apply(ctx, w, vals); err != nil {
								t.Fatal(err)
							}
							want := make([]byte, len(vals)*to.Size())
							dtype.EncodeFloat32(to, want, vals)
							fn, release, err := m.MergeRows(ctx, w)
							if err != nil {
								t.Fatal(err)
							}
							rows := w.NumEl() / cols
							for _, k := range []int64{1, 3, 64} {
								got := make([]byte, len(want))
								is, os := cols*int64(dt.Size()), cols*int64(to.Size())
								for r0 := int64(0); r0 < rows; r0 += k {
									r1 := min(r0+k, rows)
									fn(got[r0*os:r1*os], to, raw[r0*is:r1*is], r0, r1)
								}
								if !bytes.Equal(got, want) {
									i := 0
									for got[i] == want[i] {
										i++
									}
									t.Fatalf("%s %s->%s rank %d, %d adapters, fifo %v, blocks of %d rows: byte %d differs", w.Name, dt, to, r, n, fifo, k, i)
								}
							}
							release()
						}
					}
				}
			}
		}
	}
}
