package dcpclass_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/internal/dcpclass"
)

// The classes pickle admits, as module.name; the writer and the parser
// spell the same classes from the constants.
func ExampleAll() {
	all := dcpclass.All()
	fmt.Println(len(all), all[0])
	fmt.Println(dcpclass.Metadata + "." + dcpclass.TensorStorage)
	// Output:
	// 16 torch.distributed.checkpoint.metadata.Metadata
	// torch.distributed.checkpoint.metadata.TensorStorageMetadata
}
