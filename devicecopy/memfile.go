package devicecopy

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
)

// Receiving into a memory file (WithFileMapping, Linux): a storage read
// from an object store is not received into a Go buffer of its size. Its
// bytes arrive in a few buffers that the object store reuses (each 1 MiB
// piece of each GET: objstore.Object.ReadAtStream), are checked there
// (CRC32, xxh64c: chunkSums, while the piece is in the CPU's cache) and
// written with pwrite into one anonymous memory file (memfd_create) per
// load, at a page-aligned offset per storage. The storage's Data is then
// that range of one shared mapping of the file, made once without
// populating it. No page of the load's bytes is first touched through a
// user mapping during the load: the kernel writes them through its own
// map (as rclone's writes to tmpfs), and whoever reads Data later pays one
// page fault per page then, instead of the load paying two (the receive
// copy and the hashing, each through a fresh user mapping: on the PVM
// guest of docs/benchmarks.md that first touch was most of the CPU of
// `ckpt load s3://` from a server holding the object in memory).
//
// The file is not sealed: nothing else holds it. Its descriptor is closed
// at the end of the load, so the mapping alone keeps the memory; Release
// unmaps it, and without Release it lasts until the process exits, as the
// file mappings of WithFileMapping do. Where no memory file can be made
// (another system, memfd_create refused) the storages are read into Go
// memory as without WithFileMapping.

// memFile is the memory file of one LoadHost call. On Linux its bytes
// are striped over a few memory files (memfile_linux.go), so that the
// writers of different segments do not queue on one file's lock.
type memFile struct {
	fds    []int  // the files, closed (nil) once the load is over
	files  int    // how many files there are (len(fds) until closed)
	stripe int64  // bytes of one stripe: stripe s is in fds[s%len(fds)]
	m      []byte // the mapping of all of it, stripe after stripe
	mlen   uintptr
	page   int64

	mu   sync.Mutex
	next int64 // the first byte not yet given to a storage
}

// alloc gives a storage of n bytes its range of the file, starting on a
// page, and returns the range's offset and its mapping; ok is false when
// the file is full.
func (f *memFile) alloc(n int64) (off int64, data []byte, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := (n + f.page - 1) / f.page * f.page
	if n <= 0 || size > int64(len(f.m))-f.next {
		return 0, nil, false
	}
	off = f.next
	f.next += size
	return off, f.m[off : off+n : off+n], true
}

// memFileSize is what a memory file needs to hold every storage of
// storages, each from a page boundary.
func memFileSize(storages []*HostStorage) int64 {
	page := int64(os.Getpagesize())
	var n int64
	for _, hs := range storages {
		n += (max(hs.Storage.NBytes, 0) + page - 1) / page * page
	}
	return n
}

// memory returns the load's memory file, made at the first call, or nil
// when it cannot be made.
func (fm *fileMaps) memory() *memFile {
	fm.memOnce.Do(func() {
		if f, err := openMemFile(fm.memSize); err == nil {
			memFilesOpened.Add(1)
			fm.mem = f
		}
	})
	return fm.mem
}

// streamReaderAt hands over a range's bytes a piece at a time, in buffers
// it reuses (objstore.Object.ReadAtStream).
type streamReaderAt interface {
	ReadAtStream(ctx context.Context, origin, off, n int64, sink func(piece []byte, at int64) error) error
}

// toMemFile sets j up to be received into the load's memory file, when
// the stream has one and j's reader streams; it reports whether it did.
func (j *streamJob) toMemFile(st *stream) bool {
	if st.maps == nil {
		return false
	}
	outer, _ := outermost(j.ra)
	sr, ok := outer.(streamReaderAt)
	if !ok {
		return false
	}
	mem := st.maps.memory()
	if mem == nil {
		return false
	}
	off, data, ok := mem.alloc(j.hs.Storage.NBytes)
	if !ok {
		return false
	}
	if st.scratch == nil {
		st.scratch = make([]byte, batchLen*chunkBytes)
	}
	j.sr, j.mem, j.memOff, j.memData = sr, mem, off, data
	j.sums = newChunkSums(nil, int64(len(data)), j.hs.Storage.HasCRC)
	j.sums.reread = func(p []byte, at int64) error { return mem.readAt(p, off+at) }
	j.sums.scratch = st.scratch
	return true
}

// receive reads segment seg (at off in the storage) of a job received into
// the memory file: each piece is checked and written where it belongs.
func (j *streamJob) receive(ctx context.Context, off, n int64) error {
	return j.sr.ReadAtStream(ctx, j.base, j.base+off, n, func(piece []byte, at int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		j.sums.landed(piece, at)
		return j.mem.writeAt(piece, j.memOff+at)
	})
}

// memFilesOpened counts the memory files made, for tests.
var memFilesOpened atomic.Int64
