package safetensors_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/ckpt-dev/ckpt/safetensors"
)

func Example() {
	// Write a file with two tensors, streaming each tensor's bytes.
	tensors := []safetensors.WriterTensor{
		{Name: "bias", DType: "F32", Shape: []int64{2}},
		{Name: "weight", DType: "F64", Shape: []int64{1, 2}},
	}
	var buf bytes.Buffer
	w, err := safetensors.NewWriter(&buf, tensors, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range w.Order() {
		size, _ := safetensors.ByteSize(t.DType, t.Shape)
		if _, err := w.WriteTensor(t.Name, bytes.NewReader(make([]byte, size))); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	// Read its header back.
	f, err := safetensors.Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("data at", f.DataOffset, "metadata", f.Metadata)
	for _, t := range f.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Begin, t.End)
	}
	// Output:
	// data at 160 metadata map[format:pt]
	// weight F64 [1 2] 0 16
	// bias F32 [2] 16 24
}
