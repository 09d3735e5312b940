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

// freeSpace returns the bytes free to an unprivileged user in dir's
// filesystem.
func freeSpace(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
