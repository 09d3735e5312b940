package verify

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed tells the kernel that bytes [off, off+n) of f will be read
// soon (POSIX_FADV_WILLNEED: it starts reading what the page cache lacks
// in the background); a hint, its error ignored.
func willNeed(f *os.File, off, n int64) {
	if n > 0 {
		_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
	}
}
