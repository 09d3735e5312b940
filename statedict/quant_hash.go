package statedict

import (
	"errors"
	"fmt"
)

// A dequantized weight's digest (a chunked one, as xxh64c of package
// digest) can be computed by the workers that decode it, each chunk
// hashed by the worker that wrote it while its bytes are in that core's
// cache, instead of by the stream's reader afterwards, one core, a
// second pass over bytes that have left the cache: Tensor.HashStream
// asks it of the next stream, Tensor.StreamChunkSums returns the chunks'
// sums. (statedict does not import digest: the caller gives the hash.)

// ChunkHash is a hash of a stream's bytes cut into chunks of Size bytes
// (the last shorter): Sums sets sums[k] to the hash of chunks[k], chunk
// number indices[k], any chunks, on any goroutine (digest.ChunkSums).
type ChunkHash struct {
	Size int64
	Sums func(chunks [][]byte, indices, sums []uint64)
}

// ErrNotHashed is returned by Tensor.StreamChunkSums when no stream asked by
// HashStream has served the tensor's bytes whole and in order.
var ErrNotHashed = errors.New("statedict: the stream was not hashed")

// HashStream asks t's next stream (Open) to compute the digest of the
// bytes it serves, where t's reader can (a dequantized weight, the whole
// of it: the decode workers hash what they write); false, asking
// nothing, where it cannot (a view of part of one included). The next
// stream of the weight's storage takes the request: the caller opens t
// next. StreamChunkSums returns the chunks' hashes once the stream has
// served every byte.
func (t *Tensor) HashStream(h ChunkHash) bool {
	s, ok := t.quantSource()
	if !ok || h.Size <= 0 || h.Sums == nil {
		return false
	}
	s.mu.Lock()
	s.hashNext = &h
	s.mu.Unlock()
	return true
}

// StreamChunkSums returns the hashes of the chunks of t's bytes, in
// order, computed by the stream HashStream asked for: ErrNotHashed when
// none served them whole and in order.
func (t *Tensor) StreamChunkSums() ([]uint64, error) {
	s, ok := t.quantSource()
	if !ok {
		return nil, ErrNotHashed
	}
	s.mu.Lock()
	h := s.hashed
	s.hashed = nil
	s.mu.Unlock()
	if h == nil || h.next != h.total {
		return nil, &Error{Tensor: t.Name, Err: ErrNotHashed}
	}
	return h.sums, nil
}

// quantSource returns the dequantizing reader of t when t is the whole
// weight it reads (not a view of part of it).
func (t *Tensor) quantSource() (*quantSource, bool) {
	if t.Storage == nil || !t.IsContiguous() {
		return nil, false
	}
	s, ok := t.Storage.src.(*quantSource)
	if !ok {
		return nil, false
	}
	if b, e := t.Span(); b != 0 || e != s.numel*int64(s.dt.Size()) {
		return nil, false
	}
	return s, true
}

// streamHash is the hash of a stream's bytes being computed: chunk
// sums written by the decode workers (hashWhole, the chunks inside what
// each wrote) and by the stream (read: those across workers' or reads'
// edges, the one a read ends inside gathered in part).
type streamHash struct {
	ChunkHash
	total int64
	sums  []uint64
	have  []bool
	part  []byte // the start of the chunk the bytes hashed so far end inside
	next  int64  // bytes hashed so far, in order
}

func newStreamHash(total int64, h ChunkHash) *streamHash {
	n := (total + h.Size - 1) / h.Size
	return &streamHash{ChunkHash: h, total: total, sums: make([]uint64, n), have: make([]bool, n)}
}

// chunkEnd is where chunk c ends.
func (h *streamHash) chunkEnd(c int64) int64 { return min((c+1)*h.Size, h.total) }

// hashWhole hashes the chunks wholly inside bytes [lo, hi), which p
// holds from off. Workers call it on disjoint ranges.
func (h *streamHash) hashWhole(p []byte, off, lo, hi int64) {
	cs := h.Size
	var chunks [8][]byte
	var idx, sums [8]uint64
	k := 0
	flush := func() {
		h.Sums(chunks[:k], idx[:k], sums[:k])
		for i := range k {
			h.sums[idx[i]], h.have[idx[i]] = sums[i], true
		}
		k = 0
	}
	for c := (lo + cs - 1) / cs; c*cs < hi && h.chunkEnd(c) <= hi; c++ {
		if h.have[c] {
			continue
		}
		chunks[k], idx[k] = p[c*cs-off:h.chunkEnd(c)-off], uint64(c)
		k++
		if k == len(chunks) {
			flush()
		}
	}
	if k > 0 {
		flush()
	}
}

// read takes bytes [off, off+len(p)) once the workers are done with
// them: the chunk the bytes before ended inside, the whole chunks no
// worker hashed, the start of the chunk these end inside.
func (h *streamHash) read(p []byte, off int64) error {
	cs := h.Size
	end := off + int64(len(p))
	if off != h.next || end > h.total {
		return fmt.Errorf("%w: bytes [%d, %d) after %d", ErrNotHashed, off, end, h.next)
	}
	if off%cs != 0 { // the chunk begun by the reads before
		c := off / cs
		e := min(h.chunkEnd(c), end)
		h.part = append(h.part, p[:e-off]...)
		if e == h.chunkEnd(c) {
			var sum [1]uint64
			h.Sums([][]byte{h.part}, []uint64{uint64(c)}, sum[:])
			h.sums[c], h.have[c] = sum[0], true
			h.part = h.part[:0]
		}
	}
	h.hashWhole(p, off, off, end)
	if c := end / cs; end < h.total && end%cs != 0 && c*cs >= off { // a chunk begun here
		h.part = append(h.part[:0], p[c*cs-off:]...)
	}
	h.next = end
	return nil
}
