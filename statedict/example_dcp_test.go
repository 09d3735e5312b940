package statedict_test

import (
	"fmt"
	"io"
	"log"

	"github.com/ckpt-dev/ckpt/statedict"
)

// A torch.distributed.checkpoint directory opens as one checkpoint: each
// tensor at its global shape, read from the chunks the ranks saved.
func ExampleOpen_dcp() {
	ck, err := statedict.Open("../testdata/dcp/basic")
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	w := ck.Tensor("model.mlp.weight")
	fmt.Println(ck.Format, w.DType, w.Shape)
	for _, c := range w.Chunks() {
		fmt.Println("rank", c.Rank, "offsets", c.Offsets, "sizes", c.Sizes)
	}
	// Output:
	// dcp float32 [8 9]
	// rank 0 offsets [0 0] sizes [4 5]
	// rank 1 offsets [0 5] sizes [4 4]
	// rank 2 offsets [4 0] sizes [4 5]
	// rank 3 offsets [4 5] sizes [4 4]
}

// A tensor-parallel rank reads only its part of a weight, from any format.
func ExampleTensor_OpenSlice() {
	ck, err := statedict.Open("../testdata/dcp/basic")
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	w := ck.Tensor("model.embed.weight") // [10, 6] float32
	for rank := range 4 {
		rows := statedict.ChunkRange(w.Shape[0], rank, 4)
		rc, err := w.OpenSlice(rows)
		if err != nil {
			log.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, rc)
		rc.Close()
		fmt.Printf("rank %d: rows [%d, %d), %d bytes\n", rank, rows.Start, rows.Stop, n)
	}
	// Output:
	// rank 0: rows [0, 3), 72 bytes
	// rank 1: rows [3, 6), 72 bytes
	// rank 2: rows [6, 9), 72 bytes
	// rank 3: rows [9, 10), 24 bytes
}
