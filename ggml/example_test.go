package ggml_test

import (
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt/ggml"
)

// A row of 64 float32 values stored as Q8_0 (two blocks of 32) and read
// back.
func Example() {
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i-32) / 8
	}
	t, _ := ggml.ParseType("Q8_0")
	n, err := t.RowBytes(int64(len(x)))
	if err != nil {
		panic(err)
	}
	q := make([]byte, n)
	if err := ggml.Quantize(t, x, q); err != nil {
		panic(err)
	}
	y := make([]float32, len(x))
	if err := ggml.Dequantize(t, q, y); err != nil {
		panic(err)
	}
	fmt.Println(t, t.BlockSize(), t.TypeSize(), n)
	fmt.Println(x[1], y[1], x[63], y[63])

	_, err = ggml.Q4_K.RowBytes(100)
	fmt.Println(err, errors.Is(err, ggml.ErrBlockMultiple))
	// Output:
	// q8_0 32 34 68
	// -3.875 -3.8737793 3.875 3.8757324
	// ggml: row size q4_K: element count not a multiple of the block size (100 elements, block size 256) true
}
