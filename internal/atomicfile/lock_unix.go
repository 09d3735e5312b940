//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// lockTemp takes an exclusive flock on a temporary output for as long as
// it is open: the kernel drops it when the process ends, however it ends,
// so a temporary file nobody holds locked was left by a dead conversion.
func lockTemp(f *os.File) {
	syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// orphaned reports whether f, a temporary output opened by name, is
// locked by nobody, leaving it locked by f.
func orphaned(f *os.File) bool {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// nonBlock opens a FIFO without waiting for a writer.
const nonBlock = syscall.O_NONBLOCK
