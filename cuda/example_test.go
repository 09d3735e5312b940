package cuda_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt/cuda"
)

// CUDA_VISIBLE_DEVICES renumbers GPUs and stops at the first invalid entry.
func ExampleEnvironment() {
	env := map[string]string{"CUDA_VISIBLE_DEVICES": "2,0,-1,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
	e := cuda.Environment(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	for _, id := range e.IDs {
		fmt.Printf("cuda:%d -> GPU %d\n", id.Ordinal, id.Index)
	}
	fmt.Println("ignored:", e.Invalid, e.Hidden)
	// Output:
	// cuda:0 -> GPU 2
	// cuda:1 -> GPU 0
	// ignored: -1 [1]
}

// A program lists GPUs through the Inventory interface and handles a
// machine without a driver as a normal case.
func Example() {
	var inv cuda.Inventory = cuda.System{}
	devs, err := inv.Devices(context.Background())
	switch {
	case errors.Is(err, cuda.ErrNoDriver), errors.Is(err, cuda.ErrNoDevice):
		fmt.Println("no GPU: tensors stay on the CPU")
	case err != nil:
		fmt.Println("error:", err)
	default:
		fmt.Println(len(devs) > 0)
	}
}
