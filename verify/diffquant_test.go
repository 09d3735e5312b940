package verify_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

// TestDiffQuantizedRaw: a block-FP8 side, which Diff reads at any offset
// through the quantized weight's decoder (Tensor.Raw) in chunks that start
// inside blocks and rows, gives exactly the report of the same weights
// dequantized by ckpt convert (read in order through Tensor.Open) into a
// plain bfloat16 file: the values read are the same at every offset.
func TestDiffQuantizedRaw(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "a.safetensors")
	shapes := map[string][]int64{"model.layers.0.mlp.up_proj.weight": {192, 96}, "model.layers.1.self_attn.q_proj.weight": {128, 160}}
	rng := rand.New(rand.NewPCG(3, 4))
	var decl []safetensors.WriterTensor
	for name, sh := range shapes {
		decl = append(decl, safetensors.WriterTensor{Name: name, DType: "BF16", Shape: sh})
	}
	var b bytes.Buffer
	w, err := safetensors.NewWriter(&b, decl, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, wt := range w.Order() {
		n := shapes[wt.Name][0] * shapes[wt.Name][1]
		data := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(float32(rng.NormFloat64()*0.02))>>16))
		}
		if _, err := w.WriteTensor(wt.Name, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := statedict.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	spec, err := quant.ParseQuantize("fp8-block:32x32")
	if err != nil {
		t.Fatal(err)
	}
	qdir := filepath.Join(dir, "fp8") + "/"
	if _, err := convert.Convert(ctx, a, qdir, convert.WithQuantize(spec)); err != nil {
		t.Fatal(err)
	}
	q, err := statedict.Open(qdir)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	deqPath := filepath.Join(dir, "deq.safetensors")
	if _, err := convert.Convert(ctx, q, deqPath); err != nil {
		t.Fatal(err)
	}
	deq, err := statedict.Open(deqPath)
	if err != nil {
		t.Fatal(err)
	}
	defer deq.Close()
	for _, tq := range q.Tensors {
		if tq.QuantStored == nil {
			t.Fatalf("%s is not read dequantized", tq.Name)
		}
	}
	report := func(b *statedict.Checkpoint) ([]byte, *verify.DiffReport) {
		rep, err := verify.Diff(ctx, a, b, verify.WithChunkElements(777))
		if err != nil {
			t.Fatal(err)
		}
		j, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return j, rep
	}
	got, rep := report(q)
	want, _ := report(deq)
	if !bytes.Equal(got, want) {
		t.Errorf("through Raw:\n%s\ndequantized file:\n%s", got, want)
	}
	if len(rep.Tensors) != len(shapes) || rep.Differing != len(shapes) || rep.Tensors[0].Differing == 0 || rep.Tensors[0].Histogram == nil {
		t.Errorf("the data misses a case: %s", got)
	}
}
