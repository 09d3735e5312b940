package scan_test

import (
	"context"
	"fmt"

	"github.com/ckpt-dev/ckpt/scan"
)

// Audit a checkpoint before anyone calls torch.load on it.
func ExamplePaths() {
	rep, err := scan.Paths(context.Background(), []string{"../testdata/fixtures/zip_basic.pt"})
	if err != nil {
		panic(err)
	}
	fmt.Println(rep.Files, "file,", rep.Pickles, "pickle, verdict:", rep.Worst())
	for _, f := range rep.Findings[:2] {
		fmt.Println(f.Record, f.Offset, f.Global, f.Verdict)
	}
	// Output:
	// 1 file, 1 pickle, verdict: allowed
	// zip_basic/data.pkl 27 torch._utils._rebuild_tensor_v2 allowed
	// zip_basic/data.pkl 78 torch.FloatStorage allowed
}
