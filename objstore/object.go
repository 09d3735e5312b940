package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Object is one object open for reading: an io.ReaderAt over ranged GETs,
// pinned to the version that Open saw. It is safe for concurrent use.
type Object struct {
	s    *Store
	key  string
	size int64
	ver  version

	ctx    context.Context // cancelled by Close: stops read-ahead
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	blocks  []*block // cache, most recently used last
	cached  int64
	limit   int64              // bytes the cache may hold
	lastEnd int64              // end of the last read
	streams map[int64]struct{} // chunks that sequential readers are in
	closed  bool
}

// block is a cached range of the object, in flight until done is closed.
type block struct {
	off   int64
	data  []byte
	chunk bool
	done  chan struct{}
	err   error

	// Guarded by Object.mu: readers copying from data, and whether the
	// block has left the cache. A chunk's buffer goes back to the
	// Store's pool when both are done, so that streaming reuses a few
	// buffers instead of leaving gigabytes of garbage.
	refs int
	gone bool
}

func (b *block) contains(pos int64) bool {
	return pos >= b.off && pos < b.off+int64(len(b.data))
}

// Open opens the object key for reading. It makes one request, which
// learns the object's size and version and reads its first MetaWindow
// bytes (where every checkpoint format keeps its magic and, often, its
// header).
func (s *Store) Open(key string) (*Object, error) {
	if key == "" || key[len(key)-1] == '/' {
		return nil, &Error{Op: "open", URL: s.b.url(key), Err: errors.New("names a directory, not an object")}
	}
	if err := checkKey(key); err != nil {
		return nil, &Error{Op: "open", URL: s.b.url(key), Err: err}
	}
	s.mu.Lock()
	if o := s.opened[key]; o != nil {
		delete(s.opened, key)
		s.mu.Unlock()
		return o, nil
	}
	s.mu.Unlock()
	head := make([]byte, s.cfg.window)
	var n int
	var size int64
	var ver version
	err := s.do("open", key, func(ctx context.Context) error {
		var err error
		n, size, ver, err = s.b.get(ctx, key, 0, into(head), version{})
		return err
	})
	if err != nil {
		return nil, err
	}
	o := &Object{s: s, key: key, size: size, ver: ver, streams: map[int64]struct{}{},
		limit: int64(s.cfg.readAhead+2)*s.cfg.chunk + 4*s.cfg.window}
	o.ctx, o.cancel = context.WithCancel(s.ctx)
	if n > 0 {
		b := &block{off: 0, data: head[:n], done: make(chan struct{})}
		close(b.done)
		o.blocks = append(o.blocks, b)
		o.cached = int64(n)
	}
	return o, nil
}

// Size returns the object's size in bytes.
func (o *Object) Size() int64 { return o.size }

// URL returns the object's URL.
func (o *Object) URL() string { return o.s.b.url(o.key) }

// Close stops read-ahead and releases the cache. Reads after Close fail.
func (o *Object) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.blocks, o.cached = nil, 0
	o.mu.Unlock()
	o.cancel()
	o.wg.Wait()
	return nil
}

var errClosed = errors.New("objstore: read after Close")

// fetch reads [off, off+len(dst)) into dst, pinned to the object's
// version, with the Store's bound, retries and timeouts.
func (o *Object) fetch(ctx context.Context, off int64, dst []byte) error {
	return o.fetchTo(ctx, off, into(dst))
}

// fetchTo is fetch into a buffer or a streamed read's sink.
func (o *Object) fetchTo(ctx context.Context, off int64, dst dest) error {
	want := min(dst.n, o.size-off)
	return o.s.do("read", o.key, func(rctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if dst.pull != nil {
			dst.pull.holding()
		}
		n, size, _, err := o.s.b.get(ctx, o.key, off, dst.upTo(want), o.ver)
		if err != nil {
			return err
		}
		if size != o.size {
			return ErrChanged
		}
		if int64(n) != want {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
}

// ReadAt reads len(p) bytes at off. Reads of at least the chunk size go
// straight into p, in parallel GETs of up to the direct GET size
// (WithDirectGetSize) from chunk boundary to chunk boundary; smaller ones
// go through the cache of windows and chunks.
func (o *Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{Op: "read", URL: o.URL(), Err: fmt.Errorf("negative offset %d", off)}
	}
	if off >= o.size {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	var eof error
	if int64(len(p)) > o.size-off {
		p = p[:o.size-off]
		eof = io.EOF
	}
	if int64(len(p)) >= o.s.cfg.chunk {
		if err := o.readDirect(p, off, nil); err != nil {
			return 0, err
		}
		o.mu.Lock()
		o.lastEnd = off + int64(len(p))
		o.mu.Unlock()
		return len(p), eof
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		b, err := o.find(pos, done > 0)
		if err != nil {
			return done, err
		}
		select {
		case <-b.done:
		case <-o.ctx.Done():
			o.unref(b)
			return done, &Error{Op: "read", URL: o.URL(), Err: o.ctx.Err()}
		}
		if b.err != nil {
			o.unref(b)
			return done, b.err
		}
		done += copy(p[done:], b.data[pos-b.off:])
		o.unref(b)
	}
	o.mu.Lock()
	o.lastEnd = off + int64(len(p))
	o.mu.Unlock()
	return len(p), eof
}

// ReadAtPieces is ReadAt for bulk readers, which calls landed with each
// piece of p as its bytes arrive (statedict.PieceReaderAt). A read of at
// least 1 MiB goes straight into p, whatever its size, with ranged GETs in
// parallel of up to the direct GET size (WithDirectGetSize) that start at
// multiples of the chunk size in the object (a read starting there makes
// no GET that ends inside a chunk but the last); every
// 1 MiB of each GET, counted from its start, is reported from the
// goroutine that made the request, so that a checksum over the piece runs
// while it is in the CPU's cache and in parallel with the other requests.
// A smaller read goes through the cache, and all of p is reported once
// read. A piece is reported again when its request is retried after being
// cut short, with the same bytes (the object's version is pinned).
func (o *Object) ReadAtPieces(p []byte, off int64, landed func(piece []byte, off int64)) (int, error) {
	if off < 0 || off >= o.size || len(p) < landedPiece || int64(len(p)) > o.size-off {
		n, err := o.ReadAt(p, off)
		if n > 0 && (err == nil || err == io.EOF) {
			landed(p[:n], off)
		}
		return n, err
	}
	if err := o.readDirect(p, off, landed); err != nil {
		return 0, err
	}
	o.mu.Lock()
	o.lastEnd = off + int64(len(p))
	o.mu.Unlock()
	return len(p), nil
}

// readDirect fills p from off with parallel GETs of up to the direct GET
// size, reporting the pieces of each to landed (when not nil) as they
// arrive.
func (o *Object) readDirect(p []byte, off int64, landed func(piece []byte, off int64)) error {
	ctx, cancel := context.WithCancel(o.ctx)
	defer cancel()
	chunk := o.s.cfg.chunk
	step := max(chunk, o.s.cfg.directGet/chunk*chunk)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	// Ranges start at multiples of the chunk size in the object, as the
	// chunk cache's do: servers store objects in blocks (MinIO: 1 MiB,
	// each with its own checksum), and a range that starts or ends inside
	// a block costs the server the whole block. Unaligned 8 MiB ranges cost
	// MinIO about an eighth more CPU than aligned ones.
	for i := int64(0); i < int64(len(p)); {
		end := min((off+i)/chunk*chunk+step-off, int64(len(p)))
		part := p[i:end]
		i = end
		wg.Add(1)
		go func(at int64) {
			defer wg.Done()
			fctx := ctx
			if landed != nil {
				fctx = withLanded(ctx, func(piece []byte, rel int) { landed(piece, at+int64(rel)) })
			}
			if err := o.fetch(fctx, at, part); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(off + end - int64(len(part)))
	}
	wg.Wait()
	if first == nil && o.ctx.Err() != nil {
		first = &Error{Op: "read", URL: o.URL(), Err: o.ctx.Err()}
	}
	return first
}

// find returns the block holding pos, starting its fetch (and read-ahead)
// if needed. cont is true when pos continues the same ReadAt call.
//
// A miss right after bytes just read (this call's, the last call's, or
// any cached block's: several goroutines may each stream through their
// own part of the object) starts a chunk; any other miss a metadata
// window. A stream that crosses from one chunk into the next gets
// read-ahead.
func (o *Object) find(pos int64, cont bool) (*block, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, &Error{Op: "read", URL: o.URL(), Err: errClosed}
	}
	chunk := o.s.cfg.chunk
	ci := pos / chunk
	for i, b := range o.blocks {
		if b.contains(pos) {
			// most recently used last
			copy(o.blocks[i:], o.blocks[i+1:])
			o.blocks[len(o.blocks)-1] = b
			if b.chunk {
				o.sequential(ci)
			}
			b.refs++
			return b, nil
		}
	}
	var b *block
	if cont || pos == o.lastEnd || (pos > 0 && o.have(pos-1)) {
		b = o.start(ci*chunk, min(chunk, o.size-ci*chunk), true)
		o.sequential(ci)
	} else {
		w := o.s.cfg.window
		start := pos
		if o.size-pos < w {
			start = max(0, o.size-w)
		}
		b = o.start(start, min(w, o.size-start), false)
	}
	b.refs++
	return b, nil
}

// sequential notes a sequential read in chunk ci. A stream entering ci
// from ci-1 drops chunk ci-1 (a sequential reader does not come back, so
// an object read through holds no memory) and keeps ReadAhead chunks in
// flight after ci. o.mu is held.
func (o *Object) sequential(ci int64) {
	chunk := o.s.cfg.chunk
	if _, ok := o.streams[ci]; !ok {
		prev := o.chunkBlock(ci - 1)
		_, streaming := o.streams[ci-1]
		if prev == nil && !streaming {
			return
		}
		delete(o.streams, ci-1)
		if len(o.streams) >= 64 {
			clear(o.streams)
		}
		o.streams[ci] = struct{}{}
		if prev != nil && isDone(prev) {
			o.remove(prev)
		}
	}
	// Read-ahead stays within the cache's limit, shared by all streams,
	// so that it never evicts what another stream fetched ahead.
	for k := ci + 1; k <= ci+int64(o.s.cfg.readAhead) && k*chunk < o.size; k++ {
		if o.chunkBlock(k) != nil {
			continue
		}
		n := min(chunk, o.size-k*chunk)
		if o.cached+n > o.limit-chunk {
			break
		}
		o.start(k*chunk, n, true)
	}
}

// chunkBlock returns the cached chunk block of chunk k, or nil.
func (o *Object) chunkBlock(k int64) *block {
	if k < 0 {
		return nil
	}
	off := k * o.s.cfg.chunk
	for _, b := range o.blocks {
		if b.chunk && b.off == off {
			return b
		}
	}
	return nil
}

func (o *Object) have(pos int64) bool {
	for _, b := range o.blocks {
		if b.contains(pos) {
			return true
		}
	}
	return false
}

// start adds a block and fetches it in the background. o.mu is held.
func (o *Object) start(off, n int64, chunk bool) *block {
	b := &block{off: off, data: o.s.getBuf(n), chunk: chunk, done: make(chan struct{})}
	o.blocks = append(o.blocks, b)
	o.cached += n
	o.evict()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		b.err = o.fetch(o.ctx, off, b.data)
		if b.err != nil {
			o.mu.Lock()
			o.remove(b)
			o.mu.Unlock()
		}
		close(b.done)
	}()
	return b
}

// evict drops the least recently used finished blocks while the cache is
// over its limit. o.mu is held.
func (o *Object) evict() {
	for i := 0; o.cached > o.limit && i < len(o.blocks)-1; {
		b := o.blocks[i]
		if isDone(b) {
			o.remove(b)
		} else {
			i++
		}
	}
}

// remove takes b out of the cache, recycling its buffer once no reader
// holds it. o.mu is held.
func (o *Object) remove(b *block) {
	for i, c := range o.blocks {
		if c == b {
			o.blocks = append(o.blocks[:i], o.blocks[i+1:]...)
			o.cached -= int64(len(b.data))
			b.gone = true
			o.recycle(b)
			return
		}
	}
}

// unref ends a reader's use of b.
func (o *Object) unref(b *block) {
	o.mu.Lock()
	b.refs--
	o.recycle(b)
	o.mu.Unlock()
}

// recycle returns b's buffer to the pool when b has left the cache, its
// fetch is over (successfully: a failed fetch may still be writing) and
// no reader holds it. o.mu is held.
func (o *Object) recycle(b *block) {
	if b.gone && b.refs == 0 && b.data != nil && isDone(b) && b.err == nil {
		o.s.putBuf(b.data)
		b.data = nil
	}
}

func isDone(b *block) bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// cachedBytes returns the bytes the cache holds (for tests).
func (o *Object) cachedBytes() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cached
}
