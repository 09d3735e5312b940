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

// adviseHuge asks for transparent huge pages for b (MADV_HUGEPAGE), where
// the system leaves them to madvise: a 2 MiB page is one fault instead of
// 512 as read(2) or a socket fills new memory (20-35% less system time
// loading 4 GB here). Any error is ignored: the pages are then small.
func adviseHuge(b []byte) {
	page := uintptr(2 << 20)
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	skip := int((page - start%page) % page)
	if len(b)-skip < int(page) {
		return
	}
	_ = syscall.Madvise(b[skip:skip+(len(b)-skip)/int(page)*int(page)], syscall.MADV_HUGEPAGE)
}

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
