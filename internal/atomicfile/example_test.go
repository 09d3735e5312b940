package atomicfile_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
)

// Write a file that appears at its path only once complete.
func Example() {
	dir, _ := os.MkdirTemp("", "atomicfile-example")
	defer os.RemoveAll(dir)
	final := filepath.Join(dir, "out.bin")

	f, err := atomicfile.Create(final, nil) // nil: direct I/O, synced
	if err != nil {
		panic(err)
	}
	defer f.Discard() // nothing to do once committed
	w := f.Writer()
	fmt.Fprintf(w, "hello, %s\n", "world")
	if err := w.Flush(); err != nil {
		panic(err)
	}
	_, err = os.Stat(final)
	fmt.Println("before Commit, present:", err == nil)
	if err := f.Finish(); err != nil {
		panic(err)
	}
	if err := f.Commit(false); err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(final)
	fmt.Print("after Commit: ", string(b))
	// Output:
	// before Commit, present: false
	// after Commit: hello, world
}
