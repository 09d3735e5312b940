package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// copyFileRange copies n bytes at srcOff of src to dstOff of dst with
// copy_file_range(2), retrying on EINTR; it returns the bytes copied by
// the one call that copied any (0 at the end of src).
func copyFileRange(src *os.File, srcOff int64, dst *os.File, dstOff, n int64) (int64, error) {
	sc, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	dc, err := dst.SyscallConn()
	if err != nil {
		return 0, err
	}
	var k int
	var cerr error
	err = sc.Control(func(sfd uintptr) {
		err := dc.Control(func(dfd uintptr) {
			for {
				k, cerr = unix.CopyFileRange(int(sfd), &srcOff, int(dfd), &dstOff, int(n), 0)
				if cerr != unix.EINTR {
					return
				}
			}
		})
		if err != nil {
			cerr = err
		}
	})
	if err != nil {
		return 0, err
	}
	if k < 0 {
		k = 0
	}
	return int64(k), cerr
}
