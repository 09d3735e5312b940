//go:build unix

package statedict

import (
	"os"
	"syscall"
)

// nonBlock opens a FIFO without waiting for a writer.
const nonBlock = syscall.O_NONBLOCK

// clearNonBlock turns O_NONBLOCK off again on a regular file's descriptor.
func clearNonBlock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return serr
}
