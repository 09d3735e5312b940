// Package kernels owns ckpt's GPU kernels: their CUDA source (xxh64c.cu),
// the PTX built from it with clang (`make kernels`, committed and checked
// for staleness in CI), and that PTX embedded in the binary.
//
// The only kernel is xxh64c_chunks, the device side of the xxh64c checksum
// of docs/checksum.md: one thread per 64 KiB chunk computes the chunk's
// XXH64 seeded by its index, reading 32-byte stripes; the host combines
// the chunk digests (digest.Combine). Package devicecopy loads the PTX with
// cuModuleLoadData and launches it after an upload.
package kernels
