package convert_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/convert"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

// Convert a checkpoint with tied weights to safetensors, then check the
// result against the digests it records and against the source.
func Example() {
	dir, _ := os.MkdirTemp("", "convert-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	src, err := statedict.Open("../testdata/fixtures/tied.pt")
	if err != nil {
		panic(err)
	}
	defer src.Close()
	out := filepath.Join(dir, "model.safetensors")
	sum, err := convert.Convert(ctx, src, out, convert.WithDType(dtype.Float32))
	if err != nil {
		panic(err)
	}
	fmt.Println("tensors:", sum.Tensors, "aliases:", sum.Aliases)

	dst, err := statedict.Open(out)
	if err != nil {
		panic(err)
	}
	defer dst.Close()
	check, _ := verify.Check(ctx, dst)
	fmt.Println("digests checked:", check.Digests, "mismatches:", len(check.Mismatches))
	cmp, _ := verify.Compare(ctx, src, dst, verify.CompareOptions{})
	fmt.Println("compared:", cmp.Compared, "differences:", len(cmp.Differences))
	// Output:
	// tensors: 7 aliases: map[lm_head.weight:embed.weight]
	// digests checked: 7 mismatches: 0
	// compared: 8 differences: 0
}
