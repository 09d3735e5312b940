package atomicfile

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"github.com/ckpt-dev/ckpt/internal/fadvise"
)

// Writing behind. Output that does not go to the page cache for the
// kernel to write back when it likes (past the page-cache budget, and
// every byte of a synced output) is written through the page cache all
// the same, in the same aligned pieces, and every behindWindow bytes the
// kernel is told to start writing that window to the disk
// (sync_file_range), while the window behindDepth windows back is waited
// for and dropped from the cache (posix_fadvise DONTNEED). What the output
// holds of the page cache, dirty or clean, stays under (behindDepth+1)
// windows whatever its size, and the next windows reuse the pages just
// freed. The calls run on a goroutine of their own, beside the writes.
//
// Measured on the 2-core VM of docs/benchmarks.md (2026-11-28, a PVM guest
// over a virtio disk), against the O_DIRECT writes used before (4 MiB, one
// at a time: the disk's queue held one request):
//   - 3 GB written: 0.78-0.84 s behind, 1.1-1.6 s direct;
//   - 1 GB and fsync: 0.70 s behind, 1.13 s direct, 0.82-0.89 s buffered;
//   - 4 GB and fsync: 2.2-3.1 s behind, 4.1-5.1 s direct, 6.8-8.9 s
//     buffered;
//   - in the minutes when the VM's host has taken back the guest's free
//     memory (its free page reporting), every page of page cache the
//     kernel takes from free memory is a fault in the host: 1 GB
//     written through the page cache took 3.7-4.6 s of system time, the
//     same 1 GB written behind 0.24-0.47 s (its pages reused after the
//     first windows).
// Direct I/O costs less CPU (0.12-0.14 s of system time for 3 GB against
// 0.7) and stays for systems without sync_file_range and for comparison
// (WriteBehind false).

// WriteBehind chooses writing behind (above) over O_DIRECT for the bytes
// that do not go to the page cache. A variable, for tests and
// comparisons.
var WriteBehind = true

// behindWindow is the span of output whose write-back is started at
// once, and behindDepth how many windows may be under write-back before
// the oldest is waited for and dropped. Variables, for tests.
var (
	behindWindow int64 = 8 << 20
	behindDepth        = 4
)

// syncRange and dropRange are sync_file_range and
// posix_fadvise(DONTNEED) (writebehind_linux.go); variables for tests.
var (
	syncRange = sysSyncRange
	dropRange = fadvise.DontNeed
)

// errNoWriteBehind is returned by syncRange where the system has no such
// call: the output is then left to the kernel's write-back.
var errNoWriteBehind = errors.New("no sync_file_range")

// behind is a directHandle that writes behind (see above).
type behind struct {
	f      *os.File
	lo, hi int64 // written, not yet handed to the flusher
	queue  chan window
	done   chan struct{}

	mu  sync.Mutex
	err error
	off bool // write-back is the kernel's (refused)
}

// window is a span of output handed to the flusher.
type window struct{ lo, hi int64 }

func newBehind(f *os.File) *behind {
	b := &behind{f: f, queue: make(chan window, behindDepth), done: make(chan struct{})}
	go b.flush()
	return b
}

// WriteAt writes p at off through the page cache and hands the windows
// it completes to the flusher. An error of the write-back of an earlier
// window is reported here, as the write error it is.
func (b *behind) WriteAt(p []byte, off int64) (int, error) {
	if err := b.failed(); err != nil {
		return 0, err
	}
	if err := writePieces(b.f, p, off); err != nil {
		return 0, err
	}
	b.wrote(off, off+int64(len(p)))
	return len(p), b.failed()
}

// wrote counts [lo, hi), just written through the page cache, into the
// pending window, and hands the window to the flusher once it is full.
func (b *behind) wrote(lo, hi int64) {
	if lo != b.hi {
		// Not where the last write ended: what is pending is a window
		// of its own.
		b.send()
		b.lo = lo
	}
	b.hi = hi
	if b.hi-b.lo >= behindWindow {
		b.send()
	}
}

// send hands the pending bytes to the flusher (which blocks while
// behindDepth windows wait for the disk: the writer waits with it).
func (b *behind) send() {
	if b.hi > b.lo {
		b.queue <- window{b.lo, b.hi}
	}
	b.lo = b.hi
}

// flush starts the write-back of each window handed to it, and waits for
// and drops each window behindDepth back.
func (b *behind) flush() {
	defer close(b.done)
	var started []window
	for w := range b.queue {
		if b.failed() != nil || b.refused() {
			continue
		}
		if err := syncRange(b.f, w.lo, w.hi-w.lo, false); err != nil {
			b.fail(err)
			continue
		}
		started = append(started, w)
		if len(started) > behindDepth {
			o := started[0]
			started = started[1:]
			if err := syncRange(b.f, o.lo, o.hi-o.lo, true); err != nil {
				b.fail(err)
				continue
			}
			dropRange(b.f, o.lo, o.hi-o.lo)
		}
	}
}

func (b *behind) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *behind) refused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.off
}

// fail records err, or where the call is missing turns write-behind off.
func (b *behind) fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(err, errNoWriteBehind) || errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ESPIPE) || errors.Is(err, syscall.EOPNOTSUPP) {
		b.off = true
		return
	}
	if b.err == nil {
		b.err = err
	}
}

// Close hands the last window to the flusher and waits for it to start
// it; what is still under write-back is left to the kernel (and to
// Finish's fsync, for a synced output). It returns a write-back error
// the flusher met.
func (b *behind) Close() error {
	if b.queue == nil {
		return b.failed()
	}
	b.send()
	close(b.queue)
	<-b.done
	b.queue = nil
	return b.failed()
}
