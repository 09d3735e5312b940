package gguf_test

import (
	"bytes"
	"fmt"

	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
)

func Example() {
	var b bytes.Buffer
	w, err := gguf.NewWriter(&b, []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"}},
		[]gguf.TensorSpec{{Name: "token_embd.weight", Dims: []uint64{4, 2}, Type: ggml.F32}})
	if err != nil {
		panic(err)
	}
	w.WriteTensor(bytes.NewReader(make([]byte, 32)))
	w.Close()

	f, err := gguf.Parse(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		panic(err)
	}
	arch, _ := f.Get("general.architecture")
	t := f.Tensors[0]
	fmt.Println(f.Version, gguf.Format(arch.Value, 0), t.Name, t.Type, t.Dims, t.Shape(), t.Size)
	// Output: 3 "llama" token_embd.weight f32 [4 2] [2 4] 32
}
