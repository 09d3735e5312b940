package devicecopy

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A memory file is striped over memFiles files (memfd_create), a stripe
// of memStripe bytes (more for a load of over maxStripes stripes) each
// in turn, and mapped as one range, each stripe mapped from its file at
// its place. A write into a file on tmpfs holds the file's lock while the
// kernel allocates its pages and copies into them, and the first touch of
// a fresh page is the most costly step of a load on the machine of
// docs/benchmarks.md: with one file the segments received at once (eight)
// queued there for one core, whatever the other was doing. The segments
// in flight lie in consecutive stripes, so with as many files as segments
// they seldom share a file.
const (
	memFiles   = 8
	memStripe  = 32 << 20
	maxStripes = 4096
)

// openMemFile creates a memory file of size bytes, holes until written,
// mapped shared, read-write and not populated: mapping it costs no page.
func openMemFile(size int64) (_ *memFile, err error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, fmt.Errorf("memory file of %d bytes", size)
	}
	stripe := int64(memStripe)
	for (size+stripe-1)/stripe > maxStripes {
		stripe *= 2
	}
	stripes := (size + stripe - 1) / stripe
	files := min(int64(memFiles), stripes)
	f := &memFile{stripe: stripe, page: int64(unix.Getpagesize()), mlen: uintptr(stripes * stripe), files: int(files)}
	defer func() {
		if err != nil {
			f.closeFD()
		}
	}()
	for range files {
		fd, err := unix.MemfdCreate("ckpt-load", unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("memfd_create: %w", err)
		}
		f.fds = append(f.fds, fd)
		if err := unix.Ftruncate(fd, (stripes+files-1)/files*stripe); err != nil {
			return nil, fmt.Errorf("sizing the memory file: %w", err)
		}
	}
	// Reserve the range, then map each stripe over its place in it.
	base, err := unix.MmapPtr(-1, 0, nil, f.mlen, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("mapping the memory file: %w", err)
	}
	for s := int64(0); s < stripes; s++ {
		fd, off := f.locate(s * stripe)
		at := unsafe.Add(base, s*stripe)
		if _, err := unix.MmapPtr(fd, off, at, uintptr(stripe), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
			_ = unix.MunmapPtr(base, f.mlen)
			return nil, fmt.Errorf("mapping the memory file: %w", err)
		}
	}
	f.m = unsafe.Slice((*byte)(base), size)
	return f, nil
}

// locate returns the file holding byte off of the memory file and the
// byte's offset in it.
func (f *memFile) locate(off int64) (fd int, at int64) {
	s := off / f.stripe
	n := int64(len(f.fds))
	return f.fds[s%n], s/n*f.stripe + off%f.stripe
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

// all calls io (pwrite or pread) until all of p is done, a stripe at a
// time.
func (f *memFile) all(io func(int, []byte, int64) (int, error), what string, p []byte, off int64) error {
	for len(p) > 0 {
		fd, at := f.locate(off)
		q := p[:min(int64(len(p)), f.stripe-off%f.stripe)]
		n, err := io(fd, q, at)
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

// closeFD closes the files' descriptors: the mapping keeps the memory.
func (f *memFile) closeFD() {
	for _, fd := range f.fds {
		unix.Close(fd)
	}
	f.fds = nil
}

// memFreers is how many threads unmap a memory file at once (at most one
// a file, and GOMAXPROCS): the kernel frees a file's pages when its last
// stripe is unmapped, on the thread that unmaps it, and freeing a 4 GB
// load's pages took ~0.55 CPU-s (shmem_undo_range: an eighth of the
// load's CPU in docs/benchmarks.md), in the caller's wall time after all
// else when done by one thread. 0: GOMAXPROCS (tests set 1 to compare).
var memFreers = 0

// unmap drops the mapping, and with it (the descriptors closed) the
// memory. The stripes of different files are unmapped by memFreers
// threads at once, so that the files' pages are freed in parallel.
func (f *memFile) unmap() {
	if f.m == nil {
		return
	}
	base := unsafe.Pointer(unsafe.SliceData(f.m))
	f.m = nil
	n := memFreers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	n = min(n, f.files)
	if n <= 1 || f.fds != nil {
		// One thread, or the files still open (their pages are freed
		// when they are closed, not here).
		_ = unix.MunmapPtr(base, f.mlen)
		return
	}
	stripes := int64(f.mlen) / f.stripe
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := int64(0); s < stripes; s++ {
				if int(s%int64(f.files))%n == w {
					_ = unix.MunmapPtr(unsafe.Add(base, s*f.stripe), uintptr(f.stripe))
				}
			}
		}()
	}
	wg.Wait()
}
