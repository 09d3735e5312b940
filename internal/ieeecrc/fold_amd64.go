package ieeecrc

import "golang.org/x/sys/cpu"

// haveFold4 reports whether fold4 can run: AVX-512 F, BW and VL with
// VPCLMULQDQ, the operating system saving the registers.
var haveFold4 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// fold4 folds p (a positive multiple of 256 bytes), its first four bytes
// xored with state (a raw CRC state: the complement of crc32's), into 64
// bytes congruent to it modulo the IEEE polynomial, stored in out.
//
//go:noescape
func fold4(state uint32, p []byte, out *[64]byte)
