#include "textflag.h"

// Folding constants of the bit-reflected IEEE polynomial 0x104C11DB7, each
// pair (x^(D+32) mod P, x^(D-32) mod P), bit-reflected and shifted left by
// one, for a folding distance of D bits: the low quadword of a 128-bit lane
// (the earlier bytes) is multiplied by the first, the high by the second.
// TestConstants derives them.

// D = 2048: four chains of 256 bytes.
DATA k2048<>+0(SB)/8, $0x11542778a
DATA k2048<>+8(SB)/8, $0x1322d1430
GLOBL k2048<>(SB), RODATA, $16

// D = 512: one 64-byte register into the next.
DATA k512<>+0(SB)/8, $0x154442bd4
DATA k512<>+8(SB)/8, $0x1c6e41596
GLOBL k512<>(SB), RODATA, $16

// func fold4(state uint32, p []byte, out *[64]byte)
TEXT ·fold4(SB), NOSPLIT, $0-40
	MOVL state+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ out+32(FP), DI

	VMOVDQU64 (SI), Z1
	VMOVDQU64 64(SI), Z2
	VMOVDQU64 128(SI), Z3
	VMOVDQU64 192(SI), Z4
	VMOVD     AX, X10
	VPXORQ    Z10, Z1, Z1
	ADDQ      $256, SI
	SUBQ      $256, CX

	VBROADCASTI32X4 k2048<>(SB), Z0

loop:
	CMPQ CX, $256
	JB   reduce
	VMOVDQU64  (SI), Z11
	VMOVDQU64  64(SI), Z12
	VMOVDQU64  128(SI), Z13
	VMOVDQU64  192(SI), Z14
	VPCLMULQDQ $0x00, Z0, Z1, Z5
	VPCLMULQDQ $0x11, Z0, Z1, Z1
	VPCLMULQDQ $0x00, Z0, Z2, Z6
	VPCLMULQDQ $0x11, Z0, Z2, Z2
	VPCLMULQDQ $0x00, Z0, Z3, Z7
	VPCLMULQDQ $0x11, Z0, Z3, Z3
	VPCLMULQDQ $0x00, Z0, Z4, Z8
	VPCLMULQDQ $0x11, Z0, Z4, Z4
	VPTERNLOGD $0x96, Z11, Z5, Z1
	VPTERNLOGD $0x96, Z12, Z6, Z2
	VPTERNLOGD $0x96, Z13, Z7, Z3
	VPTERNLOGD $0x96, Z14, Z8, Z4
	ADDQ       $256, SI
	SUBQ       $256, CX
	JMP        loop

reduce:
	// Z2 ^= Z1 folded by 64 bytes, then Z3 by Z2, Z4 by Z3.
	VBROADCASTI32X4 k512<>(SB), Z0
	VPCLMULQDQ      $0x00, Z0, Z1, Z5
	VPCLMULQDQ      $0x11, Z0, Z1, Z1
	VPTERNLOGD      $0x96, Z5, Z1, Z2
	VPCLMULQDQ      $0x00, Z0, Z2, Z5
	VPCLMULQDQ      $0x11, Z0, Z2, Z2
	VPTERNLOGD      $0x96, Z5, Z2, Z3
	VPCLMULQDQ      $0x00, Z0, Z3, Z5
	VPCLMULQDQ      $0x11, Z0, Z3, Z3
	VPTERNLOGD      $0x96, Z5, Z3, Z4
	VMOVDQU64       Z4, (DI)
	VZEROUPPER
	RET
