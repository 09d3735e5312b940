//go:build linux && (amd64 || arm64)

package fadvise

import (
	"os"
	"syscall"
)

// POSIX_FADV_WILLNEED and POSIX_FADV_DONTNEED, the same on amd64 and
// arm64.
const (
	willNeed = 3
	dontNeed = 4
)

func advise(f *os.File, off, n int64, advice uintptr) {
	if n <= 0 || off < 0 {
		return
	}
	// Through SyscallConn, which leaves f's mode as it is (Fd would
	// make it blocking).
	if c, err := f.SyscallConn(); err == nil {
		_ = c.Control(func(fd uintptr) {
			syscall.Syscall6(syscall.SYS_FADVISE64, fd, uintptr(off), uintptr(n), advice, 0, 0)
		})
	}
}

// WillNeed tells the kernel that bytes [off, off+n) of f will be read
// soon: it starts reading what the page cache lacks, in the background.
func WillNeed(f *os.File, off, n int64) { advise(f, off, n, willNeed) }

// DontNeed tells the kernel that bytes [off, off+n) of f will not be read
// again soon: it drops them from the page cache where they are clean.
func DontNeed(f *os.File, off, n int64) { advise(f, off, n, dontNeed) }
