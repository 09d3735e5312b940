/* xxh64c chunk kernel: the GPU side of the ckpt checksum (docs/checksum.md).
 *
 * Kernel xxh64c_chunks(data, size, out): thread i (over the whole grid)
 * hashes chunk i of the size-byte buffer at data, the 64 KiB
 * data[i*65536 : min((i+1)*65536, size)], with XXH64 seeded by i, and writes
 * the digest to out[i]. Threads with i >= ceil(size/65536) do nothing. The
 * final step of xxh64c (XXH64 over the little-endian chunk digests, seeded
 * by size) runs on the host, over out[] copied back (digest.Combine): it
 * touches 8 bytes per 64 KiB, and the per-chunk digests are what locates a
 * corrupted chunk anyway.
 *
 * Requirements: data is 8-byte aligned (device allocations are 256-byte
 * aligned and ckpt places storages at 256-byte offsets), so every load is
 * aligned; the byte order is little-endian (NVIDIA GPUs and x86/arm64 hosts).
 *
 * The hashing core below is plain code in the common subset of C and C++:
 * the same source builds the PTX (clang -x cuda, see `make kernels`), a host
 * test harness (kernels/testdata/harness.cc) and the fake libcuda used by
 * devicecopy's tests, whose cuLaunchKernel runs xxh64c_chunk over fake
 * device memory. Only the qualifiers and the thread-index glue at the end
 * depend on __CUDA_ARCH__; NVIDIA's nvcc builds the file too (kernels'
 * TestNVCC), with its own names for the thread indices.
 */

#if defined(__CUDA_ARCH__)
#define XXH_FN static __attribute__((device)) inline
#else
#define XXH_FN static inline
#endif

typedef unsigned long long xxh_u64;
typedef unsigned int xxh_u32;
typedef unsigned char xxh_u8;

#define XXH_CHUNK 65536ULL
#define XXH_P1 0x9E3779B185EBCA87ULL
#define XXH_P2 0xC2B2AE3D27D4EB4FULL
#define XXH_P3 0x165667B19E3779F9ULL
#define XXH_P4 0x85EBCA77C2B2AE63ULL
#define XXH_P5 0x27D4EB2F165667C5ULL

XXH_FN xxh_u64 xxh_rotl(xxh_u64 x, int r) { return (x << r) | (x >> (64 - r)); }

/* Aligned little-endian loads (see the alignment requirement above). */
XXH_FN xxh_u64 xxh_read64(const xxh_u8 *p) {
	xxh_u64 v;
	__builtin_memcpy(&v, __builtin_assume_aligned(p, 8), 8);
	return v;
}
XXH_FN xxh_u32 xxh_read32(const xxh_u8 *p) {
	xxh_u32 v;
	__builtin_memcpy(&v, __builtin_assume_aligned(p, 4), 4);
	return v;
}

XXH_FN xxh_u64 xxh_round(xxh_u64 acc, xxh_u64 input) {
	acc += input * XXH_P2;
	acc = xxh_rotl(acc, 31);
	return acc * XXH_P1;
}

XXH_FN xxh_u64 xxh_merge(xxh_u64 acc, xxh_u64 val) {
	acc ^= xxh_round(0, val);
	return acc * XXH_P1 + XXH_P4;
}

/* XXH64(p[0:len], seed) as in the xxHash specification; p 8-byte aligned. */
XXH_FN xxh_u64 xxh64(const xxh_u8 *p, xxh_u64 len, xxh_u64 seed) {
	const xxh_u8 *end = p + len;
	xxh_u64 h;
	if (len >= 32) {
		xxh_u64 v1 = seed + XXH_P1 + XXH_P2, v2 = seed + XXH_P2, v3 = seed, v4 = seed - XXH_P1;
		const xxh_u8 *limit = end - 32;
		do { /* one 32-byte stripe */
			v1 = xxh_round(v1, xxh_read64(p));
			v2 = xxh_round(v2, xxh_read64(p + 8));
			v3 = xxh_round(v3, xxh_read64(p + 16));
			v4 = xxh_round(v4, xxh_read64(p + 24));
			p += 32;
		} while (p <= limit);
		h = xxh_rotl(v1, 1) + xxh_rotl(v2, 7) + xxh_rotl(v3, 12) + xxh_rotl(v4, 18);
		h = xxh_merge(h, v1);
		h = xxh_merge(h, v2);
		h = xxh_merge(h, v3);
		h = xxh_merge(h, v4);
	} else {
		h = seed + XXH_P5;
	}
	h += len;
	for (; p + 8 <= end; p += 8) {
		h ^= xxh_round(0, xxh_read64(p));
		h = xxh_rotl(h, 27) * XXH_P1 + XXH_P4;
	}
	if (p + 4 <= end) {
		h ^= (xxh_u64)xxh_read32(p) * XXH_P1;
		h = xxh_rotl(h, 23) * XXH_P2 + XXH_P3;
		p += 4;
	}
	for (; p < end; p++) {
		h ^= (xxh_u64)(*p) * XXH_P5;
		h = xxh_rotl(h, 11) * XXH_P1;
	}
	h ^= h >> 33;
	h *= XXH_P2;
	h ^= h >> 29;
	h *= XXH_P3;
	h ^= h >> 32;
	return h;
}

/* xxh64c_chunk is the work of thread i: the digest of chunk i of the
 * size-byte buffer at data, stored in out[i]; nothing when i is past the
 * last chunk. */
XXH_FN void xxh64c_chunk(const xxh_u8 *data, xxh_u64 size, xxh_u64 i, xxh_u64 *out) {
	xxh_u64 off = i * XXH_CHUNK;
	if (off >= size) {
		return;
	}
	xxh_u64 n = size - off < XXH_CHUNK ? size - off : XXH_CHUNK;
	out[i] = xxh64(data + off, n, i);
}

#if defined(__CUDA_ARCH__)
/* One thread per chunk: launch ceil(ceil(size/65536)/blockDim) blocks. */
extern "C" __attribute__((global)) void xxh64c_chunks(const xxh_u8 *data, xxh_u64 size, xxh_u64 *out) {
#if defined(__NVCC__) /* NVIDIA's nvcc: its own names for the special registers */
	xxh_u64 i = (xxh_u64)blockIdx.x * blockDim.x + threadIdx.x;
#else /* clang without CUDA headers */
	xxh_u64 i = (xxh_u64)__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() + __nvvm_read_ptx_sreg_tid_x();
#endif
	xxh64c_chunk(data, size, i, out);
}
#endif
