package verify_test

import (
	"context"
	"fmt"

	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

// Check a torch zip checkpoint against the CRC32s its records carry, then
// compare it with a second reading of the same file.
func Example() {
	ctx := context.Background()
	a, err := statedict.Open("../testdata/fixtures/training.pt")
	if err != nil {
		panic(err)
	}
	defer a.Close()
	check, err := verify.Check(ctx, a)
	if err != nil {
		panic(err)
	}
	fmt.Println("CRC32s:", check.CRC32s, "mismatches:", len(check.Mismatches))

	b, err := statedict.Open("../testdata/fixtures/training.pt")
	if err != nil {
		panic(err)
	}
	defer b.Close()
	cmp, err := verify.Compare(ctx, a, b, verify.CompareOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("compared:", cmp.Compared, "differences:", len(cmp.Differences))
	// Output:
	// CRC32s: 16 mismatches: 0
	// compared: 16 differences: 0
}
