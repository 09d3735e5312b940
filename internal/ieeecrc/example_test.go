package ieeecrc_test

import (
	"fmt"

	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
)

// The CRC of a record checked in two pieces, joined.
func Example() {
	rec := []byte("a zip record's payload, checked piece by piece")
	a, b := rec[:10], rec[10:]
	whole := ieeecrc.Combine(ieeecrc.Checksum(a), ieeecrc.Checksum(b), int64(len(b)))
	fmt.Printf("%08x %v\n", whole, whole == ieeecrc.Checksum(rec))
	// Output: b40ebb7e true
}
