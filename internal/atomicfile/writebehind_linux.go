package atomicfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// sysSyncRange starts the write-back of n bytes of f at off, and with
// wait waits for all of it (sync_file_range(2)): an error of that
// write-back is returned.
func sysSyncRange(f *os.File, off, n int64, wait bool) error {
	flags := unix.SYNC_FILE_RANGE_WRITE
	if wait {
		flags |= unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	}
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		for {
			serr = unix.SyncFileRange(int(fd), off, n, flags)
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
