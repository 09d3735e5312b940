package digest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// Name is the algorithm's name, used as the prefix of its printed form.
const Name = "xxh64c"

// ChunkSize is the fixed chunk length in bytes. Every chunk but the last is
// exactly this long.
const ChunkSize = 64 << 10

// batchChunks is how many consecutive chunks one ReadAt fetches in Sum.
const batchChunks = 16

// manyChunks is how many whole chunks SumBytes and Digest.Write hash in one
// call of ChunkSums.
const manyChunks = 16

var (
	// ErrSize reports a negative size.
	ErrSize = errors.New("digest: negative size")
	// ErrLength reports that the bytes hashed differ in number from the
	// declared size; the error is a *LengthError.
	ErrLength = errors.New("digest: byte count differs from the declared size")
	// ErrSyntax reports a string that is not a printed xxh64c digest.
	ErrSyntax = errors.New("digest: malformed digest string")
	// ErrChunkCount reports a chunk-digest list whose length does not match
	// the size given to Combine.
	ErrChunkCount = errors.New("digest: wrong number of chunk digests")
)

// LengthError reports input that ended before, or ran past, its declared
// size. It matches ErrLength with errors.Is.
type LengthError struct {
	Declared int64 // the size the caller declared
	Got      int64 // bytes available (short input) or offered (long input)
}

// Error reports the declared and actual byte counts.
func (e *LengthError) Error() string {
	return fmt.Sprintf("digest: got %d bytes, declared size is %d", e.Got, e.Declared)
}

// Is reports whether target is ErrLength.
func (e *LengthError) Is(target error) bool { return target == ErrLength }

// Value is one xxh64c digest.
type Value uint64

// String returns the printed form, "xxh64c:" and 16 lower-case hex digits.
func (v Value) String() string { return fmt.Sprintf("%s:%016x", Name, uint64(v)) }

// Parse reads the printed form written by Value.String. Hex digits may be
// upper or lower case; nothing else is accepted.
func Parse(s string) (Value, error) {
	hex, ok := strings.CutPrefix(s, Name+":")
	if !ok || len(hex) != 16 {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
		}
	}
	u, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, s)
	}
	return Value(u), nil
}

// ChunkCount returns how many chunks a size-byte input has: 0 for empty input.
func ChunkCount(size int64) int64 {
	return (size + ChunkSize - 1) / ChunkSize
}

// ChunkSum returns the digest of chunk number index, whose bytes are chunk:
// XXH64 seeded with index. A GPU kernel that reports per-chunk digests can be
// checked chunk by chunk against this, which locates corruption to 64 KiB.
func ChunkSum(chunk []byte, index uint64) uint64 {
	var h xxhash.Digest
	h.ResetWithSeed(index)
	h.Write(chunk)
	return h.Sum64()
}

// Combine finishes a digest from its chunk digests in chunk order, for
// callers (such as the GPU path) that computed ChunkSum themselves.
func Combine(size int64, chunkSums []uint64) (Value, error) {
	if size < 0 {
		return 0, ErrSize
	}
	if int64(len(chunkSums)) != ChunkCount(size) {
		return 0, fmt.Errorf("%w: %d for %d bytes, want %d", ErrChunkCount, len(chunkSums), size, ChunkCount(size))
	}
	var outer xxhash.Digest
	outer.ResetWithSeed(uint64(size))
	writeSums(&outer, chunkSums)
	return Value(outer.Sum64()), nil
}

func writeSums(outer *xxhash.Digest, sums []uint64) {
	var le [8]byte
	for _, s := range sums {
		binary.LittleEndian.PutUint64(le[:], s)
		outer.Write(le[:])
	}
}

// SumBytes returns the digest of b, on the calling goroutine.
func SumBytes(b []byte) Value {
	var outer xxhash.Digest
	outer.ResetWithSeed(uint64(len(b)))
	var chunks [manyChunks][]byte
	var index, sums [manyChunks]uint64
	for first := 0; first*ChunkSize < len(b); first += manyChunks {
		k := 0
		for i := first; i < first+manyChunks && i*ChunkSize < len(b); i++ {
			chunks[k], index[k] = b[i*ChunkSize:min((i+1)*ChunkSize, len(b))], uint64(i)
			k++
		}
		ChunkSums(chunks[:k], index[:k], sums[:k])
		writeSums(&outer, sums[:k])
	}
	return Value(outer.Sum64())
}

// Option configures Sum.
type Option func(*options)

type options struct {
	concurrency int
}

// WithConcurrency sets how many goroutines Sum hashes with; n < 1 means
// runtime.GOMAXPROCS(0), the default.
func WithConcurrency(n int) Option {
	return func(o *options) { o.concurrency = n }
}

// Sum returns the digest of the first size bytes of r, reading and hashing
// 1 MiB batches of chunks on several goroutines. Memory use is about 1 MiB
// per goroutine whatever the size. Input shorter than size gives a
// *LengthError; read errors are returned wrapped; ctx is checked between
// rounds of batches.
func Sum(ctx context.Context, r io.ReaderAt, size int64, opts ...Option) (Value, error) {
	if size < 0 {
		return 0, ErrSize
	}
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.concurrency < 1 {
		o.concurrency = runtime.GOMAXPROCS(0)
	}
	nchunks := ChunkCount(size)
	nbatches := (nchunks + batchChunks - 1) / batchChunks
	workers := int(min(int64(o.concurrency), max(nbatches, 1)))
	bufLen := min(size, batchChunks*ChunkSize)
	bufs := make([][]byte, workers)
	for w := range bufs {
		bufs[w] = make([]byte, bufLen)
	}
	sums := make([]uint64, workers*batchChunks)
	errs := make([]error, workers)

	var outer xxhash.Digest
	outer.ResetWithSeed(uint64(size))
	for first := int64(0); first < nchunks; first += int64(workers * batchChunks) {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		var wg sync.WaitGroup
		done := int64(0)
		for w := 0; w < workers; w++ {
			start := first + int64(w*batchChunks)
			if start >= nchunks {
				break
			}
			end := min(start+batchChunks, nchunks)
			done = end - first
			out := sums[w*batchChunks : w*batchChunks+int(end-start)]
			if w == workers-1 || end == nchunks {
				errs[w] = hashBatch(r, size, start, end, bufs[w], out)
				continue
			}
			wg.Go(func() { errs[w] = hashBatch(r, size, start, end, bufs[w], out) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return 0, err
			}
		}
		writeSums(&outer, sums[:done])
	}
	return Value(outer.Sum64()), nil
}

// hashBatch reads chunks [start, end) of the size-byte input into buf and
// writes their digests to out.
func hashBatch(r io.ReaderAt, size, start, end int64, buf []byte, out []uint64) error {
	off := start * ChunkSize
	want := min(end*ChunkSize, size) - off
	b := buf[:want]
	n, err := r.ReadAt(b, off)
	if int64(n) < want {
		if err == nil || err == io.EOF {
			return &LengthError{Declared: size, Got: off + int64(n)}
		}
		return fmt.Errorf("digest: read %d bytes at offset %d: %w", want, off, err)
	}
	var chunks [batchChunks][]byte
	var index [batchChunks]uint64
	for i := range out {
		chunks[i], index[i] = b[i*ChunkSize:min((i+1)*ChunkSize, len(b))], uint64(start)+uint64(i)
	}
	ChunkSums(chunks[:len(out)], index[:len(out)], out)
	return nil
}

// Digest computes xxh64c incrementally for writers that see the bytes once,
// in order. It needs the total size up front (it seeds the final hash) and
// uses constant memory. It implements io.Writer. A Digest is not safe for
// concurrent use.
type Digest struct {
	size    int64
	written int64
	fill    int    // bytes in the current chunk
	index   uint64 // number of the current chunk
	chunk   xxhash.Digest
	outer   xxhash.Digest
}

// New returns a Digest for an input of exactly size bytes.
func New(size int64) (*Digest, error) {
	if size < 0 {
		return nil, ErrSize
	}
	d := &Digest{size: size}
	d.chunk.ResetWithSeed(0)
	d.outer.ResetWithSeed(uint64(size))
	return d, nil
}

// Write adds p to the input. Writing past the declared size writes nothing
// and returns a *LengthError.
func (d *Digest) Write(p []byte) (int, error) {
	if int64(len(p)) > d.size-d.written {
		return 0, &LengthError{Declared: d.size, Got: d.written + int64(len(p))}
	}
	n := len(p)
	for len(p) > 0 {
		if d.fill == 0 && len(p) >= vectorMin*ChunkSize {
			// Whole chunks, hashed several at a time.
			k := min(len(p)/ChunkSize, manyChunks)
			var chunks [manyChunks][]byte
			var index, sums [manyChunks]uint64
			for i := range k {
				chunks[i], index[i] = p[i*ChunkSize:(i+1)*ChunkSize], d.index+uint64(i)
			}
			ChunkSums(chunks[:k], index[:k], sums[:k])
			writeSums(&d.outer, sums[:k])
			d.index += uint64(k)
			d.chunk.ResetWithSeed(d.index)
			p = p[k*ChunkSize:]
			continue
		}
		k := min(len(p), ChunkSize-d.fill)
		d.chunk.Write(p[:k])
		d.fill += k
		p = p[k:]
		if d.fill == ChunkSize {
			writeSums(&d.outer, []uint64{d.chunk.Sum64()})
			d.index++
			d.chunk.ResetWithSeed(d.index)
			d.fill = 0
		}
	}
	d.written += int64(n)
	return n, nil
}

// Sum returns the digest once exactly the declared number of bytes has been
// written, and a *LengthError before. It does not change the Digest's state.
func (d *Digest) Sum() (Value, error) {
	if d.written != d.size {
		return 0, &LengthError{Declared: d.size, Got: d.written}
	}
	outer := d.outer
	if d.fill > 0 {
		writeSums(&outer, []uint64{d.chunk.Sum64()})
	}
	return Value(outer.Sum64()), nil
}
