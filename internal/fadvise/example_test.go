package fadvise_test

import (
	"os"

	"github.com/ckpt-dev/ckpt/internal/fadvise"
)

// A reader of a large file asks for the next 32 MiB before it gets
// there, so that the disk reads them while it works on what it has.
func Example() {
	f, err := os.Open("fadvise_linux64.go")
	if err != nil {
		f, err = os.Open("doc.go")
	}
	if err != nil {
		return
	}
	defer f.Close()
	fadvise.WillNeed(f, 0, 32<<20)
	// ... read ...
	fadvise.DontNeed(f, 0, 32<<20)
	// Output:
}
