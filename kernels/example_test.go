package kernels_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/kernels"
)

// A 1 GiB storage has 16384 chunks of 64 KiB: 64 blocks of 256 threads.
func ExampleXXH64CGrid() {
	fmt.Println(kernels.XXH64CChunks, kernels.XXH64CGrid(1<<30), kernels.XXH64CBlock)
	// Output: xxh64c_chunks 64 256
}
