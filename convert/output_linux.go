package convert

import (
	"os"
	"syscall"
)

// openDirect opens name for writing with O_DIRECT, or returns nil where
// the filesystem does not allow it.
func openDirect(name string) *os.File {
	f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return nil
	}
	return f
}
