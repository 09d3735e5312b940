package ieeecrc

import "hash/crc32"

// The CRC-32 of A followed by B is x^(8·len(B))·crc(A) + crc(B) in GF(2)[x]
// modulo the IEEE polynomial: the pre- and post-inversion cancel out.
// Polynomials here are in the reflected bit order of crc32.IEEE: bit 31
// holds the coefficient of x^0, bit 0 that of x^31.

// Combine returns the CRC-32 of A followed by B from crcA, crcB and the
// length of B in bytes, so that pieces checked apart (or out of order)
// give the CRC of the whole.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	return Mul(Shift(lenB), crcA) ^ crcB
}

// Mul returns a·b modulo the IEEE polynomial.
func Mul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 { // b·x overflows into x^32: reduce
			b = b>>1 ^ crc32.IEEE
		} else {
			b >>= 1
		}
	}
	return p
}

// Shift returns x^(8n) modulo the IEEE polynomial: what appending n bytes
// does to the CRC of what came before (Mul(Shift(n), crc)).
func Shift(n int64) uint32 {
	result := uint32(1) << 31 // x^0
	base := uint32(1) << 23   // x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			result = Mul(result, base)
		}
		base = Mul(base, base)
	}
	return result
}
