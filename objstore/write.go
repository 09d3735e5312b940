package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// ErrExists is returned by Commit when the object appeared at the key
// since the writer was created and WithReplace(true) was not given.
var ErrExists = errors.New("the object exists")

// WriteOption configures Create.
type WriteOption func(*writeConfig)

type writeConfig struct {
	head    int64
	size    int64
	replace bool
}

// WithHead holds the first n bytes of the object back until Finish, so
// that WriteAt may rewrite them once the rest is written (a header whose
// digests are known only at the end). The held bytes are kept in whole
// parts: memory grows by n rounded up to the part size.
func WithHead(n int64) WriteOption {
	return func(c *writeConfig) {
		if n > 0 {
			c.head = n
		}
	}
}

// WithSizeHint tells the writer about how many bytes will be written, so
// that it chooses a part size keeping under the servers' part count
// limits from the start. Without it the parts grow as the object does.
func WithSizeHint(n int64) WriteOption {
	return func(c *writeConfig) {
		if n > 0 {
			c.size = n
		}
	}
}

// WithReplace lets Commit replace an existing object. Without it an
// object that exists at the key when Commit runs is left as it is and
// Commit fails with ErrExists (where the server honours the condition:
// AWS S3 and MinIO, Azure, GCS).
func WithReplace(replace bool) WriteOption { return func(c *writeConfig) { c.replace = replace } }

// partSink is one backend's side of a Writer: it receives the object's
// parts (0-based, every part but the last at least the part size) and
// makes them the object at commit.
type partSink interface {
	// begin runs before the first part is sent.
	begin(ctx context.Context) error
	// put sends part i. Sinks that are not parallel get the parts in
	// order, one at a time.
	put(ctx context.Context, i int, p []byte) error
	// commit makes parts 0..n-1 the object, atomically.
	commit(ctx context.Context, n int) error
	// single writes the whole object, p, in one request (nothing was
	// sent), the commit included.
	single(ctx context.Context, p []byte) error
	// abort takes back what was sent (best effort; ctx is not
	// cancelled).
	abort(ctx context.Context)
	// parallel reports whether parts may be sent at once and in any
	// order.
	parallel() bool
}

// headFinisher is a sink that takes the held head parts itself, after
// the last body part, instead of as parts put like any other.
type headFinisher interface {
	finish(ctx context.Context, held [][]byte) error
}

// Maximum part counts: S3's is 10000, Azure's 50000 blocks; GCS composes
// at most 32 objects but its parts go to one resumable upload.
const (
	maxParts       = 10000
	partGrowEvery  = 1000 // parts of one size before the size doubles
	minS3PartSize  = 5 << 20
	abortTimeout   = 30 * time.Second
	writeOpTimeout = 5 * time.Minute
)

// Writer streams one object to the store: Write appends, WriteAt
// rewrites the held head, Commit makes the object appear (atomically, in
// full, or not at all) and Abort takes everything back. Memory is bounded
// by (concurrency + 1 + held head parts) parts, whatever the object's
// size. A Writer is not safe for concurrent use.
//
// S3: a multipart upload, full parts sent in parallel as they fill, the
// head part(s) sent last (part 1 is the head); Commit completes the
// upload, Abort aborts it; an upload a killed process left pending for
// the key is aborted when the next Writer of the key starts sending. An
// empty object is one PutObject at Commit; any other is a multipart
// upload, even of one part (sent by Finish, so that nothing is held until
// Commit).
//
// Azure: blocks staged in parallel as they fill, the head block(s) staged
// last; Commit commits the block list. Uncommitted blocks are invisible;
// there is no call to delete them without deleting the blob, so Abort
// leaves them to the service, which drops them at the blob's next commit
// or after a week.
//
// GCS: resumable uploads are sequential, so the body goes to a temporary
// object KEY.ckpt-tmp-RANDOM.body as it is written and the head to
// KEY.ckpt-tmp-RANDOM.head at Finish; Commit composes them into the key
// and deletes them. Abort deletes them; temporaries a killed process left
// are deleted by the next Writer of the key. Every request, the resumable
// upload's chunks included, is retried by the Store. A chunk goes up
// from the part's own buffer; the bytes past its last multiple of 256 KiB
// (GCS's chunk size) wait, copied, for the next.
type Writer struct {
	s      *Store
	key    string
	cfg    writeConfig
	sink   partSink
	ctx    context.Context
	cancel context.CancelFunc
	base   int64 // size of the first parts
	nhead  int   // parts held back for the head
	slots  chan struct{}

	buf     []byte   // the part being filled
	part    int      // index of buf
	held    [][]byte // head parts
	written int64
	started bool
	sent    int // parts handed to the sink
	free    [][]byte

	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
	// alive is the capacity of the buffers alive (filling, in flight,
	// held, free); peak its maximum.
	alive, peak int64

	finished, committed, aborted bool
}

// Writable reports whether Create and Upload can write to the Store
// (s3://, gs://, az://; https:// is read-only), so that a writer can
// refuse a read-only output before doing any work.
func (s *Store) Writable() bool {
	switch s.b.(type) {
	case *s3Backend, *gcsBackend, *azureBackend:
		return true
	}
	return false
}

// Create starts writing the object key. Nothing appears at the key until
// Commit; Abort (or a failed Commit) leaves nothing behind. ctx bounds the
// writing: cancelling it fails the writer, after which Abort cleans up.
func (s *Store) Create(ctx context.Context, key string, opts ...WriteOption) (*Writer, error) {
	var cfg writeConfig
	for _, o := range opts {
		o(&cfg)
	}
	w := &Writer{s: s, key: key, cfg: cfg}
	w.ctx, w.cancel = context.WithCancel(ctx)
	w.base = s.cfg.partSize
	if w.base < minS3PartSize {
		w.base = minS3PartSize
	}
	if cfg.size > 0 {
		for cfg.size/w.base >= partGrowEvery {
			w.base *= 2
		}
	}
	w.nhead = int((cfg.head + w.base - 1) / w.base)
	conc := s.cfg.concurrency
	switch b := s.b.(type) {
	case *s3Backend:
		w.sink = &s3Sink{s: s, b: b, key: key, replace: cfg.replace}
	case *azureBackend:
		w.sink = newAzureSink(s, b, key, cfg.replace)
	case *gcsBackend:
		w.sink = newGCSSink(s, b, key, cfg.replace)
		conc = 1
	default:
		w.cancel()
		return nil, &Error{Op: "write", URL: s.b.url(key), Err: ErrReadOnly}
	}
	w.slots = make(chan struct{}, conc)
	return w, nil
}

// URL names the object being written.
func (w *Writer) URL() string { return w.s.b.url(w.key) }

// partLen returns the size of part i: the first partGrowEvery parts are
// the base size, then the size doubles every partGrowEvery parts, so that
// an object of unknown size stays under the part count limit: 8 MiB parts
// reach 8 GiB, then 24, 56, 120 GiB, ... 7.8 TiB (past S3's 5 TiB object
// limit) at the 10000th part. Memory grows with the parts only for
// objects that big.
func (w *Writer) partLen(i int) int64 {
	if i < partGrowEvery {
		return w.base
	}
	return w.base << min((i-partGrowEvery)/partGrowEvery+1, 9)
}

// MaxBuffered returns the most bytes of buffers the writer held at once.
func (w *Writer) MaxBuffered() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak
}

func (w *Writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.ctx.Err() != nil {
		return &Error{Op: "write", URL: w.URL(), Err: context.Cause(w.ctx)}
	}
	return nil
}

// fail records the first error and stops the parts in flight.
func (w *Writer) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		if w.ctx.Err() != nil {
			// Cancelled: whatever the request said, the cause is the
			// context.
			err = &Error{Op: "write", URL: w.URL(), Err: context.Cause(w.ctx)}
		}
		w.err = err
	}
	w.mu.Unlock()
	w.cancel()
}

// getBuf returns an empty buffer of capacity n, a free one if it fits.
func (w *Writer) getBuf(n int64) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, b := range w.free {
		if int64(cap(b)) == n {
			w.free = append(w.free[:i], w.free[i+1:]...)
			return b[:0]
		}
	}
	w.alive += n
	if w.alive > w.peak {
		w.peak = w.alive
	}
	return make([]byte, 0, n)
}

// putBuf makes b free for reuse.
func (w *Writer) putBuf(b []byte) {
	w.mu.Lock()
	w.free = append(w.free, b[:0])
	w.mu.Unlock()
}

// releaseAll drops every buffer (after the last part is sent).
func (w *Writer) releaseAll() {
	w.mu.Lock()
	w.free, w.held, w.buf, w.alive = nil, nil, nil, 0
	w.mu.Unlock()
}

var errWriterDone = errors.New("write after the object was finished")

// Write appends p to the object.
func (w *Writer) Write(p []byte) (int, error) {
	if w.finished || w.aborted {
		return 0, &Error{Op: "write", URL: w.URL(), Err: errWriterDone}
	}
	n := 0
	for len(p) > 0 {
		if err := w.failed(); err != nil {
			return n, err
		}
		if w.buf == nil {
			w.buf = w.getBuf(w.partLen(w.part))
		}
		k := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+k]
		n += k
		p = p[k:]
		w.written += int64(k)
		if len(w.buf) == cap(w.buf) {
			if err := w.nextPart(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// ReadFrom reads r into the part buffers until EOF (a copy needs no
// buffer of its own).
func (w *Writer) ReadFrom(r io.Reader) (int64, error) {
	if w.finished || w.aborted {
		return 0, &Error{Op: "write", URL: w.URL(), Err: errWriterDone}
	}
	var n int64
	for {
		if err := w.failed(); err != nil {
			return n, err
		}
		if w.buf == nil {
			w.buf = w.getBuf(w.partLen(w.part))
		}
		k, err := r.Read(w.buf[len(w.buf):cap(w.buf)])
		w.buf = w.buf[:len(w.buf)+k]
		n += int64(k)
		w.written += int64(k)
		if len(w.buf) == cap(w.buf) {
			if perr := w.nextPart(); perr != nil {
				return n, perr
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// WriteAt rewrites bytes already written within the head (WithHead):
// off+len(p) may pass neither the head nor what was written.
func (w *Writer) WriteAt(p []byte, off int64) (int, error) {
	if w.finished || w.aborted {
		return 0, &Error{Op: "write", URL: w.URL(), Err: errWriterDone}
	}
	end := off + int64(len(p))
	if off < 0 || end > w.cfg.head || end > w.written {
		return 0, &Error{Op: "write", URL: w.URL(), Err: fmt.Errorf("rewrite of bytes %d to %d outside the held head of %d bytes", off, end, min(w.cfg.head, w.written))}
	}
	n := 0
	for len(p) > 0 {
		i := int(off / w.base)
		var b []byte
		if i < len(w.held) {
			b = w.held[i]
		} else {
			b = w.buf // the head's last part, still filling
		}
		k := copy(b[off-int64(i)*w.base:], p)
		p, off, n = p[k:], off+int64(k), n+k
	}
	return n, nil
}

// nextPart holds or sends the full buffer and moves to the next part.
func (w *Writer) nextPart() error {
	b := w.buf
	w.buf = nil
	i := w.part
	w.part++
	if i >= maxParts {
		err := &Error{Op: "write", URL: w.URL(), Err: fmt.Errorf("object too large: more than %d parts", maxParts)}
		w.fail(err)
		return err
	}
	if i < w.nhead {
		w.held = append(w.held, b)
		return nil
	}
	return w.send(i, b)
}

// send hands part i to the sink on its own goroutine, at most
// concurrency at once.
func (w *Writer) send(i int, b []byte) error {
	if !w.started {
		w.started = true
		if err := w.sink.begin(w.ctx); err != nil {
			w.fail(err)
			return w.failed()
		}
	}
	select {
	case w.slots <- struct{}{}:
	case <-w.ctx.Done():
		return w.failed()
	}
	w.sent++
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := w.sink.put(w.ctx, i, b)
		w.putBuf(b)
		<-w.slots
		if err != nil {
			w.fail(err)
		}
	}()
	return nil
}

// Finish sends everything written: the last part and the held head
// parts. After it the object can only be committed or aborted; its
// buffers are released. Commit calls it when it was not called.
func (w *Writer) Finish() error {
	if w.aborted {
		return &Error{Op: "write", URL: w.URL(), Err: errWriterDone}
	}
	if w.finished {
		return w.failed()
	}
	w.finished = true
	if err := w.failed(); err != nil {
		return err
	}
	if w.part == 0 && len(w.buf) == 0 {
		// Empty: one empty object at Commit.
		return nil
	}
	// An object smaller than one part is sent now too, as the one part of
	// an upload completed at Commit, rather than held whole until then:
	// a conversion commits all its shards at the end, and a thousand small
	// shards held in memory would be the whole checkpoint.
	if w.buf != nil && len(w.buf) > 0 {
		if err := w.send(w.part, w.buf); err != nil {
			w.wg.Wait()
			return err
		}
		w.part++
	}
	w.buf = nil
	if hf, ok := w.sink.(headFinisher); ok {
		w.wg.Wait()
		if err := w.failed(); err != nil {
			return err
		}
		if !w.started {
			w.started = true
			if err := w.sink.begin(w.ctx); err != nil {
				w.fail(err)
				return w.failed()
			}
		}
		if err := hf.finish(w.ctx, w.held); err != nil {
			w.fail(err)
		}
	} else {
		for i, b := range w.held {
			if err := w.send(i, b); err != nil {
				break
			}
		}
		w.wg.Wait()
	}
	err := w.failed()
	if err == nil {
		w.releaseAll()
	}
	return err
}

// Commit makes the object appear, complete; on failure it aborts. It
// fails with ErrExists when an object appeared at the key and
// WithReplace(true) was not given. ctx bounds the final requests.
func (w *Writer) Commit(ctx context.Context) error {
	if w.committed {
		return nil
	}
	if err := w.Finish(); err != nil {
		w.Abort()
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(w.ctx, cancel)
	defer stop()
	var err error
	if w.part == 0 {
		err = w.sink.single(cctx, []byte{})
	} else {
		err = w.sink.commit(cctx, w.part)
	}
	if err != nil {
		if w.ctx.Err() != nil || ctx.Err() != nil {
			c := ctx.Err()
			if c == nil {
				c = context.Cause(w.ctx)
			}
			err = &Error{Op: "write", URL: w.URL(), Err: c}
		}
		w.Abort()
		return err
	}
	w.releaseAll()
	w.committed = true
	w.cancel()
	return nil
}

// Abort stops the writing and takes back everything sent: nothing is
// left behind (see Writer for Azure). It may be called more than once,
// after Commit (it does nothing then), and after the writer's context is
// cancelled.
func (w *Writer) Abort() error {
	if w.committed || w.aborted {
		return nil
	}
	w.aborted = true
	w.cancel()
	w.wg.Wait()
	if w.started || w.part == 0 {
		actx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), abortTimeout)
		defer cancel()
		w.sink.abort(actx)
	}
	w.releaseAll()
	return nil
}

// retryAbort calls fn up to 3 times until it succeeds.
func retryAbort(fn func() error) {
	for i := 0; i < 3; i++ {
		if fn() == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}
