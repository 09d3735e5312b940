package devicecopy

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// openMemFile creates an anonymous memory file (memfd_create) of size
// bytes, holes until written, and maps all of it shared, read-write and
// not populated: mapping it costs no page.
func openMemFile(size int64) (*memFile, error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, fmt.Errorf("memory file of %d bytes", size)
	}
	fd, err := unix.MemfdCreate("ckpt-load", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sizing the memory file: %w", err)
	}
	m, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mapping the memory file: %w", err)
	}
	return &memFile{fd: fd, m: m, page: int64(unix.Getpagesize())}, nil
}

// writeAt writes p at off with pwrite: the kernel copies it into the
// file's pages, which no user mapping has touched.
func (f *memFile) writeAt(p []byte, off int64) error {
	return f.all(unix.Pwrite, "writing", p, off)
}

// readAt reads len(p) bytes at off with pread.
func (f *memFile) readAt(p []byte, off int64) error {
	return f.all(unix.Pread, "reading", p, off)
}

// all calls io (pwrite or pread) until all of p is done.
func (f *memFile) all(io func(int, []byte, int64) (int, error), what string, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := io(f.fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n == 0 {
			err = fmt.Errorf("nothing done at offset %d", off)
		}
		if err != nil {
			return fmt.Errorf("%s the memory file: %w", what, err)
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// closeFD closes the file's descriptor: its mapping keeps the memory.
func (f *memFile) closeFD() {
	if f.fd >= 0 {
		unix.Close(f.fd)
		f.fd = -1
	}
}

// unmap drops the mapping, and with it (the descriptor closed) the
// memory.
func (f *memFile) unmap() {
	if f.m != nil {
		_ = unix.Munmap(f.m)
		f.m = nil
	}
}
