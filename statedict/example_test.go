package statedict_test

import (
	"fmt"
	"log"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Open reads only metadata; tensor bytes come later, on demand.
func Example() {
	ck, err := statedict.Open("../testdata/fixtures/tied.pt")
	if err != nil {
		log.Fatal(err)
	}
	defer ck.Close()
	fmt.Println(ck.Format, ck.ByteOrder)
	for _, t := range ck.Tensors[:2] {
		fmt.Println(t.Name, t.DType, t.Shape, t.Device)
	}
	// Output:
	// torch-zip little
	// embed.weight float32 [3 4] cpu
	// lm_head.weight float32 [3 4] cpu
}
