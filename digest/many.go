package digest

import (
	"math/bits"
	"unsafe"
)

// XXH64's primes.
const (
	prime1 uint64 = 0x9E3779B185EBCA87
	prime2 uint64 = 0xC2B2AE3D27D4EB4F
	prime3 uint64 = 0x165667B19E3779F9
	prime4 uint64 = 0x85EBCA77C2B2AE63
)

// laneChunk is the chunk that vector lane l of stripes8 holds.
var laneChunk = [8]int{0, 2, 1, 3, 4, 6, 5, 7}

// ChunkSums sets sums[i] = ChunkSum(chunks[i], indices[i]) for every i.
// On a CPU with AVX-512 (F and DQ) it hashes eight whole chunks at a time
// in vector lanes, about four times as fast as one at a time; chunks
// shorter than ChunkSize are hashed one by one. The three slices must have
// the same length.
func ChunkSums(chunks [][]byte, indices []uint64, sums []uint64) {
	if len(indices) != len(chunks) || len(sums) != len(chunks) {
		panic("digest: ChunkSums with slices of different lengths")
	}
	var whole [8]int // positions in chunks of the next batch
	n := 0
	for i, c := range chunks {
		if !haveStripes8 || len(c) != ChunkSize {
			sums[i] = ChunkSum(c, indices[i])
			continue
		}
		whole[n] = i
		n++
		if n == 8 {
			sums8(chunks, indices, sums, whole[:])
			n = 0
		}
	}
	switch {
	case n >= 3:
		// Fill the batch with copies of its first chunk: one vector
		// pass costs less than three chunks one by one.
		for k := n; k < 8; k++ {
			whole[k] = whole[0]
		}
		sums8(chunks, indices, sums, whole[:])
	default:
		for _, i := range whole[:n] {
			sums[i] = ChunkSum(chunks[i], indices[i])
		}
	}
}

// sums8 hashes the eight whole chunks chunks[at[0]], ..., chunks[at[7]]
// (some possibly the same) with stripes8 and finishes each as XXH64 does.
func sums8(chunks [][]byte, indices, sums []uint64, at []int) {
	var ptrs [8]*byte
	var acc [32]uint64
	for l, c := range laneChunk {
		i := at[c]
		ptrs[c] = unsafe.SliceData(chunks[i])
		seed := indices[i]
		acc[l] = seed + prime1 + prime2
		acc[8+l] = seed + prime2
		acc[16+l] = seed
		acc[24+l] = seed - prime1
	}
	stripes8(&ptrs, &acc)
	for l, c := range laneChunk {
		sums[at[c]] = finish64(acc[l], acc[8+l], acc[16+l], acc[24+l], ChunkSize)
	}
}

// round is XXH64's accumulator round.
func round(acc, lane uint64) uint64 {
	return bits.RotateLeft64(acc+lane*prime2, 31) * prime1
}

// finish64 is the end of XXH64 for an input of n bytes, n a multiple of 32
// (no tail), from its four accumulators.
func finish64(v1, v2, v3, v4 uint64, n uint64) uint64 {
	h := bits.RotateLeft64(v1, 1) + bits.RotateLeft64(v2, 7) + bits.RotateLeft64(v3, 12) + bits.RotateLeft64(v4, 18)
	for _, v := range [4]uint64{v1, v2, v3, v4} {
		h ^= round(0, v)
		h = h*prime1 + prime4
	}
	h += n
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// vectorMin is the fewest whole chunks a Digest.Write hashes together
// through ChunkSums: from three on, one vector pass (the batch filled with
// copies) costs less than the chunks one by one.
const vectorMin = 3
