package ckpt_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/safetensors"
)

// writeF32Model writes a float32 safetensors file of random weights.
func writeF32Model(t *testing.T, p string, shapes map[string][]int64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	var decl []safetensors.WriterTensor
	for name, sh := range shapes {
		decl = append(decl, safetensors.WriterTensor{Name: name, DType: "F32", Shape: sh})
	}
	var b bytes.Buffer
	w, err := safetensors.NewWriter(&b, decl, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, wt := range w.Order() {
		n := int64(1)
		for _, s := range shapes[wt.Name] {
			n *= s
		}
		data := make([]byte, 4*n)
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(rng.NormFloat64())*0.02))
		}
		if _, err := w.WriteTensor(wt.Name, bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckQuantizedRelease: a quantized release ckpt wrote (fp8-block,
// which records digests of what it stores), opened the ordinary way (its
// weights read dequantized), passes Check: the digests are checked
// against the stored codes and scales, not the dequantized values. One
// byte flipped in a code, or in a scale, is reported under that stored
// tensor's name. Load of the clean release finds no mismatch either.
func TestCheckQuantizedRelease(t *testing.T) {
	ctx := context.Background()
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeF32Model(t, in, map[string][]int64{
		"model.layers.0.mlp.up_proj.weight": {256, 128},
		"model.norm.weight":                 {128},
	})
	src, err := ckpt.Open(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	out := filepath.Join(t.TempDir(), "q") + string(os.PathSeparator)
	spec, err := ckpt.ParseQuantize("fp8-block")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ckpt.Convert(ctx, src, out, ckpt.ConvertWithQuantize(spec)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(out, "model.safetensors")

	check := func() *ckpt.CheckReport {
		t.Helper()
		ck, err := ckpt.Open(ctx, out)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		if w := ck.Tensor("model.layers.0.mlp.up_proj.weight"); w == nil || w.QuantStored == nil {
			t.Fatalf("the weight is not read dequantized: %+v", w)
		}
		rep, err := ckpt.Check(ctx, ck)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	rep := check()
	if len(rep.Mismatches) != 0 || rep.Digests != 3 || len(rep.Unverified) != 0 {
		t.Fatalf("clean release: %+v", rep)
	}
	// Load compares what it loads with the saved digests: not the
	// dequantized weight's with its codes'.
	m, err := ckpt.Load(ctx, out)
	if err != nil {
		t.Fatalf("load of the clean release: %v", err)
	}
	m.Close()

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.Parse(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight_scale_inv"} {
		t.Run(name, func(t *testing.T) {
			ti, ok := h.Lookup(name)
			if !ok {
				t.Fatalf("%s not stored", name)
			}
			at := h.DataOffset + ti.Begin + 1
			bad := bytes.Clone(data)
			bad[at] ^= 0x01
			if err := os.WriteFile(file, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(file, data, 0o644)
			rep := check()
			if len(rep.Mismatches) != 1 || rep.Mismatches[0].Name != name || rep.Mismatches[0].Kind != "digest" {
				t.Fatalf("one byte of %s flipped: %+v", name, rep.Mismatches)
			}
		})
	}
}
