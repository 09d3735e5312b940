package verify

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed tells the kernel that bytes [off, off+n) of f will be read
// soon (POSIX_FADV_WILLNEED: it starts reading what the page cache lacks
// in the background); a hint, its error ignored. The descriptor is used
// through SyscallConn, which leaves f's mode as it is (Fd would make it
// blocking).
func willNeed(f *os.File, off, n int64) {
	if n <= 0 {
		return
	}
	if c, err := f.SyscallConn(); err == nil {
		_ = c.Control(func(fd uintptr) { _ = unix.Fadvise(int(fd), off, n, unix.FADV_WILLNEED) })
	}
}
