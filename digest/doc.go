// Package digest owns ckpt's content checksum, xxh64c: the one digest that
// `ckpt load`, `ckpt convert`, `ckpt verify` and the GPU checksum kernel all
// compute over a tensor's raw bytes, so that a value computed on the host
// from the file can be compared with one computed on the device after
// upload.
//
// The definition (docs/checksum.md) is deliberately simple so that a CUDA
// kernel can compute it with one thread per chunk:
//
//  1. Split the n bytes into 64 KiB chunks; the last may be short, and
//     empty input has no chunks.
//  2. Hash chunk i with XXH64 seeded with i.
//  3. Hash the chunk digests, each written as 8 little-endian bytes in chunk
//     order, with XXH64 seeded with n.
//
// The result prints as "xxh64c:" followed by 16 lower-case hex digits.
//
// Because the final seed is the total length, every way of computing the
// digest needs the length up front: [Sum] takes it with the io.ReaderAt,
// [New] takes it for streaming writers. In exchange, streaming needs
// constant memory.
package digest
