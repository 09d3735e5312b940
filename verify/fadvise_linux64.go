//go:build linux && (amd64 || arm64)

package verify

import (
	"os"
	"syscall"
)

// fadvWillNeed is POSIX_FADV_WILLNEED.
const fadvWillNeed = 3

// willNeed tells the kernel that bytes [off, off+n) of f will be read
// soon (posix_fadvise POSIX_FADV_WILLNEED: it starts reading what the
// page cache lacks in the background); a hint, its error ignored. The
// descriptor is used through SyscallConn, which leaves f's mode as it is
// (Fd would make it blocking).
func willNeed(f *os.File, off, n int64) {
	if n <= 0 {
		return
	}
	if c, err := f.SyscallConn(); err == nil {
		_ = c.Control(func(fd uintptr) {
			syscall.Syscall6(syscall.SYS_FADVISE64, fd, uintptr(off), uintptr(n), fadvWillNeed, 0, 0)
		})
	}
}
