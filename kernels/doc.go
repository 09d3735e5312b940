// Package kernels owns ckpt's GPU kernels: their CUDA source (xxh64c.cu),
// the PTX built from it with clang and the fat binary (cubins for sm_75 to
// sm_90 plus that PTX) built from the PTX with NVIDIA's ptxas and
// fatbinary (`make kernels`, committed and checked for staleness in CI;
// see docs/gpu.md), both embedded in the binary.
//
// The only kernel is xxh64c_chunks, the device side of the xxh64c checksum
// of docs/checksum.md: one thread per 64 KiB chunk computes the chunk's
// XXH64 seeded by its index, reading 32-byte stripes; the host combines
// the chunk digests (digest.Combine). Package devicecopy loads the fat
// binary with cuModuleLoadData and launches the kernel after an upload.
package kernels
