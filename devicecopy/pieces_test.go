package devicecopy

import (
	"hash/crc32"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/digest"
)

// TestChunkSums feeds a buffer's pieces in a random order, some of them
// twice (a retried request), with cuts that split chunks, and checks that
// the digest and CRC32 equal those of the whole buffer hashed in order:
// with the buffer at hand, and without it (a storage received into a
// memory file), the chunks no piece covered whole read back with reread.
func TestChunkSums(t *testing.T) {
	for _, held := range []bool{true, false} {
		testChunkSums(t, held)
	}
}

func testChunkSums(t *testing.T, held bool) {
	rng := rand.New(rand.NewSource(2))
	for _, size := range []int{0, 1, 1000, digest.ChunkSize, digest.ChunkSize + 1, 5*digest.ChunkSize - 3, 3 << 20} {
		data := make([]byte, size)
		rng.Read(data)
		var cuts []int
		for off := 0; off < size; {
			n := 1 + rng.Intn(3*digest.ChunkSize)
			if rng.Intn(2) == 0 {
				n = digest.ChunkSize * (1 + rng.Intn(3)) // aligned, as objstore's pieces are
			}
			cuts = append(cuts, off)
			off += n
		}
		cuts = append(cuts, size)
		c := newChunkSums(data, int64(len(data)), true)
		rereads := 0
		if !held {
			c = newChunkSums(nil, int64(len(data)), true)
			c.scratch = make([]byte, batchLen*chunkBytes)
			c.reread = func(p []byte, off int64) error {
				rereads++
				copy(p, data[off:])
				return nil
			}
		}
		order := rng.Perm(len(cuts) - 1)
		for _, k := range order {
			c.landed(data[cuts[k]:cuts[k+1]], int64(cuts[k]))
			if rng.Intn(4) == 0 {
				c.landed(data[cuts[k]:cuts[k+1]], int64(cuts[k]))
			}
		}
		if err := c.fill(int64(size)); err != nil {
			t.Fatal(err)
		}
		d, crc, err := c.finish()
		if err != nil {
			t.Fatal(err)
		}
		if want := digest.SumBytes(data); d != want {
			t.Errorf("size %d (held %v): digest %v, want %v", size, held, d, want)
		}
		if want := crc32.ChecksumIEEE(data); crc != want {
			t.Errorf("size %d (held %v): CRC32 %08x, want %08x", size, held, crc, want)
		}
		split := false // a chunk lies across two pieces
		for _, c := range cuts[1:max(1, len(cuts)-1)] {
			split = split || c%digest.ChunkSize != 0
		}
		if !held && split && rereads == 0 {
			t.Errorf("size %d: no chunk read back, cuts %v", size, cuts)
		}
	}
}
