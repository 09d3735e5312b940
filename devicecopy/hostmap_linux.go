package devicecopy

import (
	"os"
	"syscall"
	"unsafe"
)

// madvPopulateRead is MADV_POPULATE_READ (Linux 5.14), which package
// syscall does not name.
const madvPopulateRead = 22

// mapFile maps all of f private and copy-on-write, or returns nil where
// it cannot (an empty file, a file system without mmap).
func mapFile(f *os.File) []byte {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= 0 || fi.Size() != int64(int(fi.Size())) {
		return nil
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return m
}

func unmapFile(m []byte) { _ = syscall.Munmap(m) }

// populate faults in the pages of b, reading them from the file where the
// page cache lacks them (MADV_POPULATE_READ, Linux 5.14); older kernels
// get MADV_WILLNEED, which starts the reads without waiting for them.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	// madvise wants a page-aligned start: the partial first page is
	// faulted in by the read itself.
	page := uintptr(os.Getpagesize())
	if skip := int((page - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%page) % page); skip > 0 {
		if skip >= len(b) {
			return
		}
		b = b[skip:]
	}
	if err := syscall.Madvise(b, madvPopulateRead); err != nil {
		_ = syscall.Madvise(b, syscall.MADV_WILLNEED)
	}
}
