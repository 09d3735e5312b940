package atomicfile

import (
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/ckpt-dev/ckpt/internal/par"
)

// Output files are written through Writer: buffers aligned in memory,
// filled by the converting goroutine and written by another, so that
// reading, hashing and casting the next piece overlaps with writing the
// last. A writer that writes everything through the page cache (written
// behind or left to the kernel) takes buffers of cachedBlock (512 KiB),
// faulted in once and still in the CPU's cache when the kernel copies
// them; one with an O_DIRECT handle takes outputBlock (4 MiB), as larger
// direct writes are faster. 1 GB safetensors -> bf16 warm: 0.23-0.26 s,
// 2.0k faults, against 0.30-0.33 s, 4.9k faults with 4 MiB buffers; a 4 GB
// merge 1.70-1.83 s against 2.30-2.91 s (same rounds, docs/benchmarks.md). Full buffers that are not left to the kernel's write-back
// (past the page-cache budget, writeback.go, and every byte of a synced
// output) are written behind (writebehind.go): through the page cache,
// each window of output handed to the disk as soon as it is written and
// dropped from the cache once there, so that the output does not pile
// up gigabytes of dirty pages for the final fsync to wait on or the
// kernel to throttle, and the same few pages of cache are reused. Where
// sync_file_range is missing, or with WriteBehind off, they go through a
// second handle opened with O_DIRECT (Linux): the bytes go from the
// buffer to the device without a copy into the page cache, at the disk's
// speed; with one write at a time that was 1.4-2x slower than writing
// behind on the VM of docs/benchmarks.md. The last partial block goes
// through the ordinary handle, and a filesystem that refuses direct I/O
// (at open or at the first write) gets ordinary writes.
//
// What goes through the page cache is written in pieces of cachedPiece
// bytes, small as cp's in-kernel copy writes (copy_file_range falls back
// to a splice of 64 KiB at a time): the kernel sizes the page-cache folios of a
// buffered write by the write's length, so one 4 MiB write makes 2 MiB
// folios, and those come from the free blocks of order 9 and above. A VM
// with free page reporting (virtio-balloon; page_reporting_order 9) hands
// exactly those blocks back to its host a couple of seconds after they are
// freed, and every first touch of them afterwards is a fault in the host:
// on the 2-core VM of docs/benchmarks.md, 1 GB written in 4 MiB pieces
// after a sync and 2 s idle took 1.0-2.7 s of system time (all of it in
// copy_folio_from_iter_atomic), in 64 KiB pieces 0.33-0.37 s, in 256 KiB
// pieces 0.32-0.35 s (cp: 0.22-0.27 s). Since
// 2026-11-28 (local35e) the pieces are 256 KiB: folios of order 6, still
// below the reported order, and a quarter of the system calls and of the
// folios to allocate and put on the LRU: 1 GB warm through the piped copy
// (pipecopy.go), 0.52-0.70 CPU-s against 0.66-0.76 in 64 KiB pieces.

const (
	// outputBlock is the size of one output buffer; outputBuffers of them
	// are in flight.
	outputBlock   = 4 << 20
	outputBuffers = 3
	// directAlign is the alignment O_DIRECT asks of buffer addresses,
	// file offsets and lengths (the page size, a multiple of every
	// logical block size in use).
	directAlign = 4096
	// cachedPiece is the most one write through the page cache writes
	// (see above).
	cachedPiece = 256 << 10
)

// directHandle is a file opened for direct I/O (an *os.File; an
// interface for tests).
type directHandle interface {
	io.WriterAt
	io.Closer
}

// forceBuffered turns direct I/O off (for tests of the ordinary path).
var forceBuffered = false

// alignedBuffer returns n bytes whose address is a multiple of
// directAlign.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+directAlign)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (directAlign - 1))
	return b[skip : skip+n : skip+n]
}

// blocks holds output buffers between files: a sharded conversion keeps
// every shard's temporary file open until the last is done, and must not
// keep every shard's buffers too. A free list (par.FreeList), not a sync.Pool: the
// collector empties a pool, and every shard of a 4 GB conversion then
// faulted in 12 MiB of fresh buffers (~3,000 page faults, 30-50 ms on the
// VM of docs/benchmarks.md). It keeps two writers' buffers (shards are
// written two or more at once: convert/shardwrite.go).
var blocks = &par.FreeList[byte]{Max: 2 * outputBuffers, New: alignedBuffer}

// smallBlocks holds the buffers of cachedBlock bytes of writers that
// write nothing with direct I/O.
var smallBlocks = &par.FreeList[byte]{Max: 2 * outputBuffers, New: alignedBuffer}

// cachedBlock is the size of one buffer of a writer that writes
// everything through the page cache (written behind or not).
const cachedBlock = 2 * cachedPiece

type writeJob struct {
	b      []byte
	off    int64
	cached bool        // through the page cache, counted in the budget already (pipecopy.go)
	behind bool        // written behind, whatever its alignment (pipecopy.go)
	ret    chan []byte // where b goes once written; nil: free
}

// Writer writes a file sequentially from offset 0 (File.Writer). Write
// errors are reported by a later Write or by Flush. After Flush it must
// not be used.
type Writer struct {
	f      *os.File      // ordinary handle: the tail, and the fallback
	cached io.WriterAt   // f, written through by writeCached (a recorder in tests)
	direct directHandle  // O_DIRECT handle, nil when not in use
	budget *atomic.Int64 // bytes that may still go to the page cache; nil: none

	inCache atomic.Int64 // bytes written through the page cache by the budget (for tests)

	writes   int         // page-cache writes of the budget's bytes (recycle.go)
	dear     int         // measured writes in a row found dear (recycle.go)
	recycled atomic.Bool // the budget's bytes are recycled (recycle.go)

	buf  []byte // being filled
	made int    // buffers taken from blocks (next), at most outputBuffers
	off  int64  // file offset of buf[0]
	fill int    // buf is sent at this length; 0: when full (see realign)
	free chan []byte
	jobs chan writeJob
	wg   sync.WaitGroup // outstanding jobs

	pipeFree chan []byte // the piped copy's buffers (pipecopy.go)
	pipeMade int
	piped    int64 // bytes given to the piped copy (PipeLimit)

	mu  sync.Mutex
	err error

	closed bool
}

// newWriter starts a writer for f, which must be empty and open for
// writing at its start. Full buffers go to the page cache while budget
// (shared by a conversion's outputs; see writeback.go) has room for them,
// then are written behind (or with direct I/O); a nil budget has none.
func newWriter(f *os.File, budget *atomic.Int64) *Writer {
	w := &Writer{f: f, cached: f, budget: budget, free: make(chan []byte, outputBuffers), jobs: make(chan writeJob, outputBuffers)}
	switch {
	case forceBuffered:
	case WriteBehind:
		w.direct = newBehind(f)
	default:
		if d := openDirect(f); d != nil {
			w.direct = d
		}
	}
	w.buf = w.next()
	go w.run()
	return w
}

// next returns an empty buffer to fill: a free one, or while fewer than
// outputBuffers are in use and none is free, one more from blocks. A
// writer whose bytes are copied in the kernel (copyrange.go) fills
// only the first, with the header, and so takes no others.
func (w *Writer) next() []byte {
	if w.made < outputBuffers && len(w.free) == 0 {
		w.made++
		if _, direct := w.direct.(*os.File); !direct {
			// Everything goes through the page cache, in pieces of
			// cachedPiece: small buffers, faulted in once and
			// still in the CPU's cache when written.
			return (*smallBlocks.Get(cachedBlock))[:0]
		}
		return (*blocks.Get(outputBlock))[:0]
	}
	return <-w.free
}

func (w *Writer) run() {
	for j := range w.jobs {
		if w.failed() == nil {
			var err error
			switch {
			case j.cached:
				err = w.writeBudget(j.b, j.off)
			case j.behind && w.direct != nil:
				_, err = w.direct.WriteAt(j.b, j.off)
			case j.behind:
				err = w.writeCached(j.b, j.off)
			default:
				err = w.writeAt(j.b, j.off)
			}
			if err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
			}
		}
		if j.ret != nil {
			j.ret <- j.b[:0]
		} else {
			w.free <- j.b[:0]
		}
		w.wg.Done()
	}
}

// writeAt writes b at off: through the page cache while the budget lasts,
// then through w.direct (written behind, or direct I/O) when b is
// aligned, through the ordinary handle otherwise or when the filesystem
// turns direct I/O down.
func (w *Writer) writeAt(b []byte, off int64) error {
	if w.budget != nil && w.budget.Load() >= int64(len(b)) && w.budget.Add(-int64(len(b))) >= 0 {
		w.inCache.Add(int64(len(b)))
		return w.writeBudget(b, off)
	}
	if w.direct != nil && len(b)%directAlign == 0 && off%directAlign == 0 {
		_, err := w.direct.WriteAt(b, off)
		if err == nil || !errors.Is(err, syscall.EINVAL) {
			return err
		}
		// Direct I/O refused at write time (some network and FUSE
		// filesystems): whatever was written is rewritten below.
		w.direct.Close()
		w.direct = nil
	}
	return w.writeCached(b, off)
}

// writeCached writes b at off through the ordinary handle, in pieces of
// at most cachedPiece bytes (see the top of this file) that do not cross
// a multiple of cachedPiece in the file: a write that starts off such a
// boundary is given smaller folios by the kernel (a folio's index must be
// a multiple of its size), and the rest of the file, written on from it,
// as well. A safetensors header of some kilobytes puts every tensor's
// bytes off the boundaries: 1 GiB written in 256 KiB pieces from offset
// 20488 took 0.22-0.24 s of system time against 0.14-0.16 from offset 0
// (dd, the 2-core VM of docs/benchmarks.md), and this writer's own busy
// time was 0.19-0.25 s for 1 GB against cp's 0.17 s in all.
func (w *Writer) writeCached(b []byte, off int64) error { return writePieces(w.cached, b, off) }

// writePieces writes b at off to f in the pieces writeCached describes.
func writePieces(f io.WriterAt, b []byte, off int64) error {
	for len(b) > 0 {
		k := min(len(b), cachedPiece-int(off%cachedPiece))
		if _, err := f.WriteAt(b[:k], off); err != nil {
			return err
		}
		b, off = b[k:], off+int64(k)
	}
	return nil
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// sendAt is the length at which the buffer being filled is sent.
func (w *Writer) sendAt() int {
	if w.fill > 0 {
		return w.fill
	}
	return cap(w.buf)
}

// realign makes the buffer being filled end at a multiple of directAlign
// in the file, after bytes written around the buffers (copyRange) left
// w.off unaligned: later buffers then start aligned and can be written
// directly.
func (w *Writer) realign() {
	w.fill = 0
	if r := int(w.off % directAlign); r != 0 {
		w.fill = cap(w.buf) - r
	}
}

// send hands b, to be written at w.off, to the writing goroutine.
func (w *Writer) send(b []byte) {
	w.fill = 0
	w.wg.Add(1)
	w.jobs <- writeJob{b: b, off: w.off}
	w.off += int64(len(b))
}

// errFinished is the error of a write after finish.
var errFinished = errors.New("convert: write after the output was finished")

// Write copies p into the buffers, writing each as it fills.
func (w *Writer) Write(p []byte) (int, error) {
	if w.closed {
		return 0, errFinished
	}
	if err := w.failed(); err != nil {
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		k := copy(w.buf[len(w.buf):w.sendAt()], p)
		w.buf = w.buf[:len(w.buf)+k]
		n += k
		p = p[k:]
		if len(w.buf) == w.sendAt() {
			w.send(w.buf)
			w.buf = w.next()
			if err := w.failed(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// ReadFrom reads r into the buffers until EOF, writing each as it fills,
// so that a copy into the output needs no buffer of its own. A
// RangeReader (alone or under an io.LimitedReader, as io.CopyN makes) is
// copied in the kernel instead where the system allows (copyrange.go).
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	if w.closed {
		return 0, errFinished
	}
	var n int64
	lr, limited := r.(*io.LimitedReader)
	inner, limit := r, int64(-1)
	if limited {
		inner, limit = lr.R, lr.N
	}
	if rr, ok := inner.(RangeReader); ok {
		k, fallback, err := w.copyRange(rr, limit)
		n += k
		if limited {
			lr.N -= k
		}
		if err != nil || !fallback && (!limited || lr.N == 0) {
			return n, err
		}
	}
	for {
		if err := w.failed(); err != nil {
			return n, err
		}
		k, err := r.Read(w.buf[len(w.buf):w.sendAt()])
		w.buf = w.buf[:len(w.buf)+k]
		n += int64(k)
		if len(w.buf) == w.sendAt() {
			w.send(w.buf)
			w.buf = w.next()
		}
		if err == io.EOF {
			return n, w.failed()
		}
		if err != nil {
			return n, err
		}
	}
}

// Flush writes out everything buffered and waits for it (finish); after
// it only File.WriteAt may write the file.
func (w *Writer) Flush() error { return w.finish() }

// finish writes what is buffered, waits for every write and releases the
// direct handle. The file itself stays open.
func (w *Writer) finish() error {
	if w.closed {
		return w.failed()
	}
	// The buffer goes back through the writing goroutine (or straight
	// to free) so that release finds every buffer exactly once; its tail
	// stays readable, nothing reuses it once stopped.
	buf := w.buf
	w.buf = nil
	aligned := len(buf) &^ (directAlign - 1)
	tail := buf[aligned:]
	if aligned > 0 {
		w.send(buf[:aligned])
	} else {
		w.free <- buf[:0]
	}
	w.stop()
	defer w.release()
	if err := w.failed(); err != nil {
		return err
	}
	if len(tail) > 0 {
		if err := w.writeCached(tail, w.off); err != nil {
			return err
		}
	}
	return nil
}

// release gives the buffers back to the pool, once stopped.
func (w *Writer) release() {
	put := func(b []byte) {
		if cap(b) < outputBlock {
			smallBlocks.Put(&b)
		} else {
			blocks.Put(&b)
		}
	}
	if w.buf != nil {
		put(w.buf)
		w.buf = nil
	}
	for len(w.free) > 0 {
		put(<-w.free)
	}
	w.releasePipe()
}

// stop waits for the writing goroutine to end and closes the direct
// handle.
func (w *Writer) stop() {
	if w.closed {
		return
	}
	w.closed = true
	w.wg.Wait()
	close(w.jobs)
	if w.direct != nil {
		// Writing behind reports here an error of the write-back it
		// started.
		if err := w.direct.Close(); err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.mu.Unlock()
		}
		w.direct = nil
	}
}
