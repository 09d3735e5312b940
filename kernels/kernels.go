package kernels

import _ "embed"

// XXH64CPTX is the PTX of xxh64c.cu (PTX ISA 6.3, sm_75), as `make
// kernels` builds it with clang. sm_75 is the oldest target CUDA 13 still
// supports (it dropped sm_70).
//
//go:embed xxh64c.ptx
var XXH64CPTX []byte

// XXH64CFatbin is the fat binary `make kernels` builds from XXH64CPTX with
// NVIDIA's ptxas and fatbinary (CUDA 11.8): machine code (cubins) for
// XXH64CArchs plus XXH64CPTX itself, uncompressed. The driver loads the
// cubin that fits the GPU (a cubin for sm_XY runs on sm_XZ, Z >= Y), so
// Turing, Ampere, Ada and Hopper GPUs need no PTX JIT; newer ones
// (Blackwell) JIT-compile the embedded PTX. Package devicecopy loads this,
// not XXH64CPTX.
//
//go:embed xxh64c.fatbin
var XXH64CFatbin []byte

// XXH64CArchs are the compute capabilities (major*10+minor) that
// XXH64CFatbin holds cubins for.
var XXH64CArchs = [...]int{75, 80, 86, 89, 90}

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
