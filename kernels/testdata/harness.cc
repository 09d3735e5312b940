// Host harness for kernels_test.go: runs the chunk kernel's core, compiled
// from the same source as the PTX, over the file named by argv[1] and prints
// one chunk digest per line as 16 hex digits.
#include <cstdio>
#include <cstdlib>

#include "../xxh64c.cu"

int main(int argc, char **argv) {
	if (argc != 2) {
		std::fprintf(stderr, "usage: harness FILE\n");
		return 2;
	}
	std::FILE *f = std::fopen(argv[1], "rb");
	if (!f) {
		std::perror(argv[1]);
		return 1;
	}
	std::fseek(f, 0, SEEK_END);
	long size = std::ftell(f);
	std::fseek(f, 0, SEEK_SET);
	// malloc is at least 16-byte aligned, as the kernel requires 8.
	xxh_u8 *data = (xxh_u8 *)std::malloc(size > 0 ? size : 1);
	if (!data || std::fread(data, 1, size, f) != (size_t)size) {
		std::fprintf(stderr, "reading %s failed\n", argv[1]);
		return 1;
	}
	xxh_u64 chunks = ((xxh_u64)size + XXH_CHUNK - 1) / XXH_CHUNK;
	xxh_u64 *out = (xxh_u64 *)std::malloc((chunks + 1) * sizeof(xxh_u64));
	// As the grid does: every thread index, including some past the end.
	for (xxh_u64 i = 0; i < chunks + 3; i++) {
		if (i < chunks) {
			out[i] = 0;
		}
		xxh64c_chunk(data, (xxh_u64)size, i, out);
	}
	for (xxh_u64 i = 0; i < chunks; i++) {
		std::printf("%016llx\n", out[i]);
	}
	return 0;
}
