package convert

import "io"

// aheadReader reads its source in a goroutine, up to two buffers ahead,
// so that reading (and whatever the source does: casting, hashing)
// overlaps with the caller's writes.
type aheadReader struct {
	full    chan chunk
	free    chan []byte
	stop    chan struct{}
	done    chan struct{}
	cur     []byte // unread part of the current chunk
	curBuf  []byte // the current chunk's buffer, returned to free when used
	err     error
	stopped bool
}

type chunk struct {
	b   []byte
	err error
}

// newAheadReader starts reading src into two buffers of size bytes. Close
// stops the goroutine; src must not be used until Close returns.
func newAheadReader(src io.Reader, size int) *aheadReader {
	a := &aheadReader{full: make(chan chunk, 2), free: make(chan []byte, 2), stop: make(chan struct{}), done: make(chan struct{})}
	a.free <- make([]byte, size)
	a.free <- make([]byte, size)
	go a.fill(src)
	return a
}

func (a *aheadReader) fill(src io.Reader) {
	defer close(a.done)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(src, buf)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		c := chunk{b: buf[:n], err: err}
		select {
		case a.full <- c:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		if a.curBuf != nil {
			a.free <- a.curBuf[:cap(a.curBuf)]
			a.curBuf = nil
		}
		c := <-a.full
		a.cur, a.curBuf, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops the reading goroutine and waits for it.
func (a *aheadReader) Close() error {
	if !a.stopped {
		a.stopped = true
		close(a.stop)
		<-a.done
	}
	return nil
}

// readAheadSize is the read-ahead buffer size for an output buffer of
// bufSize: reads from the (page-cached) source are cheap in large pieces,
// while writes stay small to ride the kernel's dirty-page throttling.
// Measured on 1 GB here, 1 MiB reads instead of 64 KiB cut .pth output by
// 20-30% and safetensors output by 6-17%.
func readAheadSize(bufSize int) int { return max(bufSize, 1<<20) }
