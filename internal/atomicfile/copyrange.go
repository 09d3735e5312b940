package atomicfile

import (
	"io"
	"os"
	"sync/atomic"
)

// Bytes that lie unchanged in a local file (a tensor of a .pth or
// safetensors input that is written as it is) are copied into the output
// by the kernel, as cp copies (copy_file_range): page cache to page
// cache, with no pass through a buffer of this process, which is what
// kept a conversion at 2-3x cp's time (docs/benchmarks.md). The reader
// handed to Writer.ReadFrom says where its bytes lie (RangeReader), and
// is told of each piece copied, so that it can check the bytes, read
// back from the output, while the next piece is copied. Where the bytes
// go to the page cache, the piped copy (pipecopy.go, PipedCopy) is used
// instead by default: the reader's own Read into small buffers that are
// written as they are, which moves the bytes through memory once less
// than the kernel's copy and the read-back.

// RangeReader is a reader whose remaining bytes lie unchanged in a local
// file. Writer.ReadFrom (and so io.Copy and io.CopyN into a Writer)
// copies them into the output in the kernel where the system allows, and
// reads them through Read otherwise or for what is left after a failed
// copy.
type RangeReader interface {
	io.Reader
	// FileRange returns the file and the range [off, off+n) of it that
	// holds the reader's remaining bytes.
	FileRange() (f *os.File, off, n int64)
	// Copied tells the reader that its next k bytes were copied into
	// out at outOff (readable there with ReadAt): it skips them. An
	// error stops the copy and is ReadFrom's.
	Copied(out *os.File, outOff, k int64) error
}

// copyPiece is the most one copy_file_range call copies: the reader
// checks a piece while the next is copied.
const copyPiece = 8 << 20

// MinRangeCopy is the least copied in the kernel: smaller ranges go
// through the buffers, which costs less than the system calls and the
// partial buffer the copy makes the writer send. A variable, for tests.
var MinRangeCopy int64 = 256 << 10

// copyFile is copyFileRange; a variable, for tests of a refused or short
// copy.
var copyFile = copyFileRange

// RangeCopies counts the bytes copied by copyRange (in the kernel, or
// piped) by every Writer (for tests and benchmarks, that the copy was
// taken).
var RangeCopies atomic.Int64

// NoRangeCopy turns the in-kernel copy off: every RangeReader is read
// (for tests of the ordinary path, and for comparisons).
var NoRangeCopy = false

// copyRange copies up to limit (< 0: all) of r's bytes into the file at
// w.off in the kernel. It returns the bytes copied; fallback is true
// when the rest must be read through r (the copy is not possible here,
// or stopped short), false when all was copied or err is set.
func (w *Writer) copyRange(r RangeReader, limit int64) (n int64, fallback bool, err error) {
	src, off, size := r.FileRange()
	if limit >= 0 && limit < size {
		size = limit
	}
	if NoRangeCopy || src == nil || size < MinRangeCopy {
		return 0, true, nil
	}
	reserved := w.direct != nil && w.reserve(size)
	_, writesBehind := w.direct.(*behind)
	writesBehind = writesBehind && !reserved && PipedCopy
	if w.direct != nil && !reserved && !writesBehind {
		// Bytes that do not go to the page cache (past the budget, or
		// a synced output, which has none) go with direct I/O where
		// they are not written behind (writer.go): read once into this
		// process, where the checks see them, and written from there. A
		// copy by the kernel would copy them twice (in, and back out
		// for the checks) and then wait for the write-back: measured on
		// 4 GB warm past the budget, 4.1 CPU-s against 2.5, and with
		// --sync 1.9x (1 GB) and 1.5x (4 GB) cp && sync's time against
		// 0.97x by the direct path (docs/benchmarks.md, 2026-11-26).
		// Written behind, they go through the piped copy below, each
		// block written behind.
		return 0, true, nil
	}
	if reserved {
		// What is not copied is given back.
		defer func() { w.budget.Add(size - n) }()
	}
	// What is buffered goes first, to its place before the copy's.
	if len(w.buf) > 0 {
		w.send(w.buf)
		w.buf = w.next()
		if err := w.failed(); err != nil {
			return 0, false, err
		}
	}
	defer w.realign()
	if writesBehind {
		return w.pipeRange(r, size, true)
	}
	if PipedCopy && (w.piped+size <= PipeLimit || w.recycling()) {
		// A Writer that recycles its page cache (recycle.go) pipes
		// every copy: the kernel's copy would take fresh pages.
		w.piped += size
		if w.budget != nil && !reserved {
			// No direct I/O: counted as copied, and what is not
			// copied given back.
			w.budget.Add(-size)
			defer func() { w.budget.Add(size - n) }()
		}
		return w.pipeRange(r, size, false)
	}
	for n < size {
		k, cerr := copyFile(src, off+n, w.f, w.off, min(size-n, copyPiece))
		if k > 0 {
			if w.budget != nil {
				if !reserved {
					w.budget.Add(-k) // no direct I/O: counted as copied
				}
				w.inCache.Add(k)
			}
			RangeCopies.Add(k)
			at := w.off
			w.off += k
			n += k
			if err := r.Copied(w.f, at, k); err != nil {
				return n, false, err
			}
		}
		if cerr != nil || k == 0 {
			// Refused (another filesystem, no such call) or short
			// (the input changed): the rest is read, and a short
			// input reported as such.
			return n, true, nil
		}
	}
	return n, false, nil
}

// reserve takes n bytes from the page-cache budget, all or none, and
// reports whether it did: a tensor copied into the page cache is
// counted before its copy starts, so that shards written at once
// (convert/shardwrite.go) cannot both pass the check and together
// exceed the budget.
func (w *Writer) reserve(n int64) bool {
	if w.budget == nil {
		return false
	}
	for {
		left := w.budget.Load()
		if left < n {
			return false
		}
		if w.budget.CompareAndSwap(left, left-n) {
			return true
		}
	}
}
