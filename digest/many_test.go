package digest

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestChunkSums checks ChunkSums (eight chunks at a time in vector lanes
// where the CPU allows) against ChunkSum one by one: random chunks, whole
// and short, with random indices, in batches of every size from 0 to 20
// (a batch of 3 to 7 whole chunks pads the vector with copies).
func TestChunkSums(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	data := make([]byte, 24*ChunkSize)
	rng.Read(data)
	for n := 0; n <= 20; n++ {
		chunks := make([][]byte, n)
		indices := make([]uint64, n)
		for i := range chunks {
			off := rng.Intn(len(data) - ChunkSize)
			size := ChunkSize
			if rng.Intn(5) == 0 {
				size = rng.Intn(ChunkSize)
			}
			chunks[i] = data[off : off+size]
			indices[i] = rng.Uint64() >> uint(rng.Intn(64))
		}
		sums := make([]uint64, n)
		ChunkSums(chunks, indices, sums)
		for i := range chunks {
			if want := ChunkSum(chunks[i], indices[i]); sums[i] != want {
				t.Fatalf("batch of %d: chunk %d (%d bytes, index %d): %016x, want %016x", n, i, len(chunks[i]), indices[i], sums[i], want)
			}
		}
	}
	if !haveStripes8 {
		t.Log("no AVX-512 here: ChunkSums hashed one chunk at a time")
	}
}

func BenchmarkChunkSums(b *testing.B) {
	data := make([]byte, 16*ChunkSize)
	rand.New(rand.NewSource(6)).Read(data)
	chunks := make([][]byte, 16)
	indices := make([]uint64, 16)
	for i := range chunks {
		chunks[i] = data[i*ChunkSize : (i+1)*ChunkSize]
		indices[i] = uint64(i)
	}
	sums := make([]uint64, 16)
	b.Run("vector", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			ChunkSums(chunks, indices, sums)
		}
	})
	b.Run("one-by-one", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			for i, c := range chunks {
				sums[i] = ChunkSum(c, indices[i])
			}
		}
	})
}

func BenchmarkDigestWrite(b *testing.B) {
	data := pattern(64 << 20)
	for _, w := range []int{64 << 10, 192 << 10, 256 << 10, 512 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("write=%dK", w>>10), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				d, _ := New(int64(len(data)))
				for off := 0; off < len(data); off += w {
					d.Write(data[off:min(off+w, len(data))])
				}
				d.Sum()
			}
		})
	}
}
