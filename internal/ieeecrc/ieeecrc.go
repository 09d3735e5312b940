// Package ieeecrc computes the IEEE CRC-32 (the zip format's checksum),
// the same values as hash/crc32 with crc32.IEEETable, faster on CPUs with
// AVX-512 and VPCLMULQDQ: four independent 256-byte folding chains where
// the standard library folds one (latency bound). Other CPUs, and inputs
// shorter than a few KiB, use hash/crc32 itself.
package ieeecrc

import (
	"hash"
	"hash/crc32"
)

// minVector is the shortest input folded with the four chains: below it
// the standard library's single chain costs about as much.
const minVector = 4096

// Update returns the CRC-32 of crc's input followed by p, as
// crc32.Update(crc, crc32.IEEETable, p).
func Update(crc uint32, p []byte) uint32 {
	if !haveFold4 || len(p) < minVector {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	n := len(p) &^ 255
	var z [64]byte
	fold4(^crc, p[:n], &z)
	// The 64 folded bytes are congruent, as a polynomial, to the first n
	// bytes with the running CRC applied: their CRC from a zero state
	// (crc32.Update's state is the complement of its argument) continues
	// into the rest of p.
	c := crc32.Update(0xFFFFFFFF, crc32.IEEETable, z[:])
	return crc32.Update(c, crc32.IEEETable, p[n:])
}

// Checksum returns the CRC-32 of p, as crc32.ChecksumIEEE.
func Checksum(p []byte) uint32 { return Update(0, p) }

// New returns a hash.Hash32 computing the CRC-32, as crc32.NewIEEE.
func New() hash.Hash32 { return new(digest) }

type digest struct{ crc uint32 }

func (d *digest) Write(p []byte) (int, error) { d.crc = Update(d.crc, p); return len(p), nil }
func (d *digest) Sum32() uint32               { return d.crc }
func (d *digest) Reset()                      { d.crc = 0 }
func (d *digest) Size() int                   { return 4 }
func (d *digest) BlockSize() int              { return 1 }
func (d *digest) Sum(in []byte) []byte {
	s := d.crc
	return append(in, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}
