package torchzip

import (
	"io"
	"sync"
)

// SmallReadCache returns an io.ReaderAt over the size bytes of r that
// serves reads of up to 512 bytes from one cached window and passes larger
// ones through. The window starts at 512 bytes and doubles, up to 64 KiB,
// while each miss lands close after the last window (records' headers a
// few bytes apart), so that headers megabytes apart cost what they did: what reading a zip's local headers, or the first
// bytes of each record, needs in order to cost one read per window rather
// than one per record. NewReader reads archives through one. It is safe
// for concurrent use: a read that finds another at the window reads past
// it.
func SmallReadCache(r io.ReaderAt, size int64) io.ReaderAt { return &headerWindow{r: r, size: size} }

// headerWindow is the io.ReaderAt archive/zip reads an archive through:
// small reads (a record's 30-byte local header, which zip.File.DataOffset
// reads for every record) are served from one cached window of
// headerWindowSize bytes, so that a torch.save of many small tensors,
// whose local headers lie close together, costs one read per window
// rather than one per record (30,000 records: 30,000 preads, or round
// trips to an object store, before). Larger reads go straight through.
type headerWindow struct {
	r    io.ReaderAt
	size int64

	mu   sync.Mutex
	off  int64
	buf  []byte // the window's bytes: [off, off+len(buf)) of the archive
	grow int    // the next window's size
}

const (
	headerWindowSize = 64 << 10
	smallRead        = 512
)

func (w *headerWindow) ReadAt(p []byte, off int64) (int, error) {
	if len(p) > smallRead || off < 0 || off >= w.size {
		return w.r.ReadAt(p, off)
	}
	if !w.mu.TryLock() {
		// Another reader is at the window (Reader.PrefetchSpans reads
		// headers from several goroutines): read past it rather than
		// wait for its read.
		return w.r.ReadAt(p, off)
	}
	defer w.mu.Unlock()
	if off < w.off || off+int64(len(p)) > w.off+int64(len(w.buf)) {
		if end := w.off + int64(len(w.buf)); len(w.buf) > 0 && off > w.off && off-end < headerWindowSize {
			w.grow = min(max(2*w.grow, smallRead), headerWindowSize)
		} else {
			w.grow = smallRead
		}
		n := min(int64(w.grow), w.size-off)
		if cap(w.buf) < int(n) {
			w.buf = make([]byte, w.grow)
		}
		got, err := w.r.ReadAt(w.buf[:n], off)
		if got < len(p) { // the window could not be filled: keep nothing
			c := copy(p, w.buf[:got])
			w.buf = w.buf[:0]
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
				if off+int64(len(p)) > w.size {
					err = io.EOF
				}
			}
			return c, err
		}
		w.off, w.buf = off, w.buf[:got]
	}
	n := copy(p, w.buf[off-w.off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
