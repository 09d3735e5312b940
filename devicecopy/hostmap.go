package devicecopy

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
)

// Mapping local files (WithFileMapping): a storage stored as is (not
// compressed) in a local file is not copied into fresh memory but taken
// from a private mapping of the whole file, the way torch.load(mmap=True)
// and safetensors load. Fresh memory costs the kernel a page fault and a
// zeroed page for every 4 KiB before read(2) copies the bytes in: on the
// 4 GB benchmark that zeroing and copying was most of the load's time
// (perf: clear_page_erms 65%, _copy_to_iter 30% of the samples), and a
// cold load took 1.4-2.1x as long as reading the file with dd
// iflag=direct. A mapping reads the file into the page cache once and
// maps those pages (docs/benchmarks.md).
//
// The bytes are still read, checked and hashed, in file order, a piece at
// a time; the pages are faulted in ahead of the hashing in windows of
// mapAhead bytes (MADV_POPULATE_READ, which also starts the file's
// read-ahead when the page cache is cold).

// mapAhead is how far ahead of the hashing pages are populated.
const mapAhead = 64 << 20

// WithFileMapping makes LoadHost take the storages held uncompressed in
// local files (a torch.save zip's stored records, safetensors, legacy
// .pt, DCP items) from a private, copy-on-write mapping of the file
// (mmap MAP_PRIVATE) instead of copying them into new memory: the load
// costs what reading the file costs, and the memory is the page cache's.
// Their bytes are read, checked (CRC32) and hashed all the same.
//
// Mapped Data differs from copied Data in three ways: Release unmaps it,
// so no slice of it may be used after Release (copied Data stays valid
// while referenced); a later change to the file may show through (as
// with torch.load(mmap=True)); and a file truncated while mapped makes
// reading the lost pages fault (SIGBUS; a fault during LoadHost itself is
// returned as an error). Without Release the mappings last until the
// process exits. Where a file cannot be mapped (another system, a file
// system without mmap) its storages are copied; compressed records are
// always copied.
//
// Storages larger than 1 MiB read from an object store (objstore's
// Object) are received into one anonymous memory file per load
// (memfd_create, Linux) and their Data is a shared mapping of it (MemFile
// true): checked and hashed as the pieces arrive, written by the kernel,
// never touched through a mapping during the load (memfile.go). Release
// unmaps it as it unmaps files; a mapping taken before Release must not
// be used after it. Elsewhere, or where no memory file can be made, they
// are copied into Go memory.
func WithFileMapping() HostOption { return func(c *hostConfig) { c.mapFiles = true } }

// fileMaps holds the mappings of one LoadHost call, one per file.
type fileMaps struct {
	mu   sync.Mutex
	byFD map[*os.File][]byte // nil value: the file cannot be mapped
	all  [][]byte            // every mapping, for release

	// The memory file that storages from an object store are received
	// into (memfile.go): made at the first such storage.
	memSize int64
	memOnce sync.Once
	mem     *memFile
}

// region returns n bytes at off in f's mapping, or nil when f cannot be
// mapped or the bytes lie outside it.
func (fm *fileMaps) region(f *os.File, off, n int64) []byte {
	fm.mu.Lock()
	m, seen := fm.byFD[f]
	if !seen {
		m = mapFile(f)
		if fm.byFD == nil {
			fm.byFD = map[*os.File][]byte{}
		}
		fm.byFD[f] = m
		if m != nil {
			fm.all = append(fm.all, m)
		}
	}
	fm.mu.Unlock()
	if m == nil || off < 0 || n < 0 || off > int64(len(m)) || n > int64(len(m))-off {
		return nil
	}
	return m[off : off+n : off+n]
}

// release unmaps every mapping.
func (fm *fileMaps) release() {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	for _, m := range fm.all {
		unmapFile(m)
	}
	fm.all, fm.byFD = nil, nil
	fm.closeMem()
	if fm.mem != nil {
		fm.mem.unmap()
	}
}

// closeMem closes the memory file's descriptor (its mapping stays).
func (fm *fileMaps) closeMem() {
	fm.memOnce.Do(func() {}) // no memory file after this
	if fm.mem != nil {
		fm.mem.closeFD()
	}
}

// localFile returns the local file r reads from and where r's bytes start
// in it, as far as the readers' Outer methods tell (see segmented).
func localFile(r io.Reader) (*os.File, int64, bool) {
	ra, ok := r.(io.ReaderAt)
	if !ok {
		return nil, 0, false
	}
	outer, base := outermost(ra)
	f, ok := outer.(*os.File)
	return f, base, ok
}

// outermost follows ra's Outer methods (io.SectionReader's) to the reader
// they lead to, and returns it with where ra's bytes start in it.
func outermost(ra io.ReaderAt) (io.ReaderAt, int64) {
	outer, base := ra, int64(0)
	for {
		sr, ok := outer.(interface {
			Outer() (io.ReaderAt, int64, int64)
		})
		if !ok {
			return outer, base
		}
		var off int64
		outer, off, _ = sr.Outer()
		base += off
	}
}

// hashMapped checks and hashes data, a mapped storage, a piece at a time,
// populating the pages ahead of the hashing. A fault on reading (the file
// was truncated after it was mapped) is returned as an error, not a crash.
func hashMapped(ctx context.Context, hs *HostStorage, data []byte, report func(int64)) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the file changed while it was read (a mapped page could not be read: %v)", r)
		}
	}()
	s := hs.Storage
	d, err := digest.New(int64(len(data)))
	if err != nil {
		return err
	}
	var crc uint32
	for off := 0; off < len(data); off += pieceSize {
		if off%mapAhead == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			populate(data[off:min(off+2*mapAhead, len(data))])
		}
		piece := data[off:min(off+pieceSize, len(data))]
		if s.HasCRC {
			crc = ieeecrc.Update(crc, piece)
		}
		d.Write(piece)
		report(int64(len(piece)))
	}
	if hs.Digest, err = d.Sum(); err != nil {
		return err
	}
	if s.HasCRC && crc != s.CRC32 {
		return &CRCError{File: s.File, Record: s.Record, Storage: s.Key, Tensors: users(hs.Tensors, hs.Values), Want: s.CRC32, Got: crc}
	}
	hs.Data, hs.CRCChecked, hs.Mapped = data, s.HasCRC, true
	return nil
}
