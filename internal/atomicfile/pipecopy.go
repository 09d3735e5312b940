package atomicfile

import (
	"io"

	"github.com/ckpt-dev/ckpt/internal/par"
)

// The piped copy: bytes of a RangeReader that go to the page cache are
// read through the reader itself (its Read: a pread of the input into a
// small reused buffer, and the reader's checks over those bytes while
// they are in the CPU's cache), and written to the output from that same
// buffer by the writing goroutine, while the converting goroutine reads
// and checks the next piece. The bytes cross memory as often as cp's
// in-kernel copy moves them (input page cache into the cache, cache
// into the output's page cache), where copy_file_range followed by a read
// back of the output for the checks moves them three times. What the
// checks verify is still what lands in the file: the buffer written is
// the buffer checked, and it is not reused until its write has returned.

// PipedCopy chooses the piped copy over copy_file_range for bytes that
// go to the page cache (see above; docs/benchmarks.md has the
// comparison). A variable, for tests and comparisons.
var PipedCopy = true

// PipeLimit is how many bytes of one file go through the page cache
// before its range copies switch from the piped copy to copy_file_range
// (a copy that would pass it is made by the kernel). Measured on the
// loaded 2-core VM (docs/benchmarks.md, local35e): 1 GB warm, the piped
// copy 0.59-0.64 CPU-s against 0.64-0.79 for copy_file_range and the read
// back; 4 GB warm, 2.1-4.5 CPU-s with twice the context switches against
// 2.3-2.5, the slow rounds once the kernel's write-back of earlier output
// runs beside the copy. A variable, for tests and comparisons.
var PipeLimit int64 = 1 << 30

// pipeRead is the most read (and checked) at once: small enough to stay
// in the CPU's L2 cache between the read and the checks, and a whole
// number of 8 digest chunks (convert's checkBufSize), the least the
// digest hashes with its vector kernel.
const pipeRead = 512 << 10

// PipeBlock is the size of one buffer handed to the writing goroutine,
// filled by reads of pipeRead bytes. Larger hand-offs wake the other
// goroutine less often, but each of the pipeBuffers is fresh memory to
// fault in once: 1 GB warm, blocks of 512 KiB, 1 and 2 MiB made 7.1k,
// 5.8k and 4.7k context switches and 2.95k, 3.3k and 3.6k page faults,
// for CPU-seconds within each other's noise (docs/benchmarks.md). A
// variable, for tests and comparisons.
var PipeBlock = 512 << 10

// pipeBuffers is the number of buffers a Writer cycles through: one
// being filled, one being written, one ready.
const pipeBuffers = 3

// pipeBufs holds the piped copy's buffers between files (two writers'
// worth: shards are written at once), faulted in once per process.
var pipeBufs = &par.FreeList[byte]{Max: 2 * pipeBuffers}

// nextPipe returns an empty buffer of PipeBlock bytes' capacity: a free
// one, or while fewer than pipeBuffers are in use, one more.
func (w *Writer) nextPipe() []byte {
	if w.pipeFree == nil {
		w.pipeFree = make(chan []byte, pipeBuffers)
	}
	if w.pipeMade < pipeBuffers && len(w.pipeFree) == 0 {
		w.pipeMade++
		return (*pipeBufs.Get(PipeBlock))[:0]
	}
	return <-w.pipeFree
}

// pipeRange copies size bytes of r into the output at w.off through
// the piped copy; they are already counted in the page-cache budget, or
// with behind they are written behind (writebehind.go). It returns the
// bytes copied; fallback is true when r ended early (the rest, if any, is
// read by the ordinary loop, where r reports the short input).
func (w *Writer) pipeRange(r RangeReader, size int64, behind bool) (n int64, fallback bool, err error) {
	for n < size {
		if err := w.failed(); err != nil {
			return n, false, err
		}
		b := w.nextPipe()
		want := int(min(int64(cap(b)), size-n))
		if r := int((w.off + int64(want)) % cachedPiece); r != 0 && want > r {
			// A block ends on a multiple of the cached pieces where
			// it can (all but a range's last), so that the next
			// starts on one and is written in whole pieces
			// (writeCached).
			want -= r
		}
		var rerr error
		for len(b) < want && rerr == nil {
			var k int
			k, rerr = r.Read(b[len(b):min(len(b)+pipeRead, want)])
			b = b[:len(b)+k]
			if k == 0 && rerr == nil {
				rerr = io.ErrNoProgress
			}
		}
		if len(b) > 0 {
			w.wg.Add(1)
			w.jobs <- writeJob{b: b, off: w.off, cached: !behind, behind: behind, ret: w.pipeFree}
			w.off += int64(len(b))
			n += int64(len(b))
			if !behind {
				w.inCache.Add(int64(len(b)))
			}
			RangeCopies.Add(int64(len(b)))
		} else {
			w.pipeFree <- b
		}
		if rerr == io.EOF {
			return n, true, nil
		}
		if rerr != nil {
			return n, false, rerr
		}
	}
	return n, false, nil
}

// releasePipe gives the piped copy's buffers back, once stopped.
func (w *Writer) releasePipe() {
	for w.pipeFree != nil && len(w.pipeFree) > 0 {
		b := <-w.pipeFree
		pipeBufs.Put(&b)
	}
}
