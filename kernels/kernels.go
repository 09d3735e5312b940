package kernels

import _ "embed"

// XXH64CPTX is the PTX of xxh64c.cu (PTX ISA 6.3, sm_75, JIT-compiled by
// the driver for newer GPUs), as `make kernels` builds it. sm_75 is the
// oldest target CUDA 13 still supports (it dropped sm_70). No cubin is
// shipped: Debian's clang 14 knows no sm_90 and needs NVIDIA's ptxas to
// assemble PTX to machine code, so the driver's PTX JIT compiles this on
// first load.
//
//go:embed xxh64c.ptx
var XXH64CPTX []byte

// Kernel xxh64c_chunks(const u8 *data, u64 size, u64 *out): thread i of
// the grid writes to out[i] the XXH64, seeded with i, of the i-th 64 KiB
// chunk of the size bytes at data (8-byte aligned); threads past the last
// chunk do nothing.
const (
	// XXH64CChunks is the kernel's name in XXH64CPTX.
	XXH64CChunks = "xxh64c_chunks"
	// XXH64CBlock is the block size (threads per block) to launch it with.
	XXH64CBlock = 256
)

// XXH64CGrid returns the number of blocks of XXH64CBlock threads that
// cover the chunks of a size-byte buffer: one thread per chunk.
func XXH64CGrid(size uint64) uint32 {
	chunks := (size + ChunkSize - 1) / ChunkSize
	return uint32((chunks + XXH64CBlock - 1) / XXH64CBlock)
}

// ChunkSize is the chunk length the kernel hashes (XXH_CHUNK in the
// source): digest.ChunkSize, repeated here because kernels imports nothing.
const ChunkSize = 64 << 10
