package devicecopy

import (
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
)

// chunkSums checks a storage from pieces that arrive in any order, from
// several goroutines at once: each whole digest chunk (64 KiB) inside a
// piece gets its xxh64c chunk digest and its own CRC32 there and then,
// while the piece is in the CPU's cache; finish hashes whatever no piece
// covered whole and combines the chunks' values in order. The result is
// the same as hashing the storage front to back.
type chunkSums struct {
	data []byte // the storage's buffer, or nil: see reread
	size int64  // the storage's size
	crc  bool   // compute the CRC32 too
	// Without data (a storage received into a memory file), the chunks
	// that no piece covered whole are read back with reread into
	// scratch (batchLen chunks).
	reread  func(p []byte, off int64) error
	scratch []byte
	sums    []uint64
	crcs    []uint32
	done    []bool // chunk i hashed; set by the goroutine that hashed it
	next    int64  // fill's progress: the chunks before it are hashed
}

// chunkBytes is the size of a digest chunk.
const chunkBytes = digest.ChunkSize

// newChunkSums checks a storage of size bytes, held in data (or, data
// nil, elsewhere: see reread).
func newChunkSums(data []byte, size int64, crc bool) *chunkSums {
	n := digest.ChunkCount(size)
	c := &chunkSums{data: data, size: size, crc: crc, sums: make([]uint64, n), done: make([]bool, n)}
	if crc {
		c.crcs = make([]uint32, n)
	}
	return c
}

// landed hashes the chunks that lie wholly in piece, the bytes of data at
// off. Pieces reported by concurrent goroutines must not share a chunk
// they both cover whole (disjoint pieces never do).
func (c *chunkSums) landed(piece []byte, off int64) {
	end := off + int64(len(piece))
	size := c.size
	var b batch
	for i := (off + digest.ChunkSize - 1) / digest.ChunkSize; ; i++ {
		cb := i * digest.ChunkSize
		ce := min(cb+digest.ChunkSize, size)
		if cb >= end || ce > end {
			break
		}
		if b.add(i, piece[cb-off:ce-off]) {
			c.hash(&b)
		}
	}
	c.hash(&b)
}

// batch is up to batchLen chunks to hash together (digest.ChunkSums hashes
// eight at a time in vector lanes where the CPU can).
type batch struct {
	n      int
	chunks [batchLen][]byte
	index  [batchLen]uint64
	sums   [batchLen]uint64
}

const batchLen = 16

// add queues chunk i and reports whether the batch is full.
func (b *batch) add(i int64, chunk []byte) bool {
	b.chunks[b.n], b.index[b.n] = chunk, uint64(i)
	b.n++
	return b.n == batchLen
}

// hash hashes and empties the batch.
func (c *chunkSums) hash(b *batch) {
	if b.n == 0 {
		return
	}
	digest.ChunkSums(b.chunks[:b.n], b.index[:b.n], b.sums[:b.n])
	for k := range b.n {
		i := b.index[k]
		c.sums[i] = b.sums[k]
		if c.crc {
			c.crcs[i] = ieeecrc.Checksum(b.chunks[k])
		}
		c.done[i] = true
	}
	b.n = 0
}

// fill hashes the chunks that no piece covered whole and that end at or
// before end, the bytes before end being final: every read into them has
// returned. Calls must come in increasing order of end.
func (c *chunkSums) fill(end int64) error {
	var b batch
	defer c.hash(&b)
	for ; c.next < int64(len(c.done)); c.next++ {
		cb := c.next * digest.ChunkSize
		ce := min(cb+digest.ChunkSize, c.size)
		if ce > end {
			return nil
		}
		if c.done[c.next] {
			continue
		}
		chunk, err := c.chunk(cb, ce, b.n)
		if err != nil {
			return err
		}
		if b.add(c.next, chunk) {
			c.hash(&b)
		}
	}
	return nil
}

// chunk returns the bytes [cb, ce) of the storage, for slot k of a batch.
func (c *chunkSums) chunk(cb, ce int64, k int) ([]byte, error) {
	if c.data != nil {
		return c.data[cb:ce], nil
	}
	p := c.scratch[k*digest.ChunkSize:][:ce-cb]
	return p, c.reread(p, cb)
}

// finish returns the storage's xxh64c digest and CRC32 (0 unless asked
// for). Every chunk must be hashed (fill over the whole storage).
func (c *chunkSums) finish() (digest.Value, uint32, error) {
	d, err := digest.Combine(c.size, c.sums)
	if err != nil || !c.crc {
		return d, 0, err
	}
	return d, combineCRCs(c.size, c.crcs), nil
}

// combineCRCs returns the CRC32 (IEEE) of size bytes from the CRC32s of
// their digest chunks, in order.
func combineCRCs(size int64, crcs []uint32) uint32 {
	var crc uint32
	whole := ieeecrc.Shift(digest.ChunkSize)
	for i, v := range crcs {
		shift := whole
		if last := size - int64(i)*digest.ChunkSize; last < digest.ChunkSize {
			shift = ieeecrc.Shift(last)
		}
		crc = ieeecrc.Mul(shift, crc) ^ v
	}
	return crc
}
