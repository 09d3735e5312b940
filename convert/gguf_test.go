package convert

import (
	"bytes"
	"context"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestGGUFQuantizeRows: a tensor large enough for its rows to be
// quantized by several goroutines (and in several chunks) is written as
// ggml.Quantize writes the whole tensor, for each type.
func TestGGUFQuantizeRows(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	dir := t.TempDir()
	m := &tinyLlama{shapes: map[string][]int64{}, data: map[string][]float32{}}
	r := rand.New(rand.NewSource(3))
	v := make([]float32, 1200*1024) // 1.17 chunks of ggufRows, 1200 rows
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	m.names = []string{"w"}
	m.shapes["w"], m.data["w"] = []int64{1200, 1024}, v
	m.write(t, dir, `{}`)
	for _, typ := range []ggml.Type{ggml.Q8_0, ggml.Q4_K, ggml.Q6_K, ggml.F16} {
		ck, err := statedict.Open(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, typ.String()+".gguf")
		_, err = Convert(context.Background(), ck, out, WithFormat(GGUF), WithGGUFType(typ.String()),
			WithGGUFMetadata(gguf.KV{Key: "general.architecture", Type: gguf.TypeString, Value: "x"}))
		ck.Close()
		if err != nil {
			t.Fatal(err)
		}
		f, b := readGGUFFile(t, out)
		n, _ := typ.RowBytes(int64(len(v)))
		want := make([]byte, n)
		if err := ggml.Quantize(typ, v, want); err != nil {
			t.Fatal(err)
		}
		if got := ggufData(f, b, "w"); !bytes.Equal(got, want) {
			t.Errorf("%s: differs from ggml.Quantize of the whole tensor", typ)
		}
		os.Remove(out)
	}
}
