#include "textflag.h"

// func stripes8(ptrs *[8]*byte, acc *[32]uint64)
//
// Runs the XXH64 stripe loop over eight 64 KiB chunks at once: 2048
// stripes of 32 bytes, each of the four 8-byte lanes of a stripe updating
// its accumulator as acc = rotl(acc + lane*PRIME64_2, 31) * PRIME64_1.
// acc[8*j+l] is accumulator j+1 of the chunk in vector lane l; lane l
// holds chunk order[l] with order = 0, 2, 1, 3, 4, 6, 5, 7 (what the
// transpose below produces). Needs AVX-512 F and DQ (VPMULLQ).
TEXT ·stripes8(SB), NOSPLIT, $0-16
	MOVQ ptrs+0(FP), AX
	MOVQ 0(AX), SI
	MOVQ 8(AX), R8
	MOVQ 16(AX), R9
	MOVQ 24(AX), R10
	MOVQ 32(AX), R11
	MOVQ 40(AX), R12
	MOVQ 48(AX), R13
	MOVQ 56(AX), BX
	MOVQ acc+8(FP), DI
	VMOVDQU64 0(DI), Z0
	VMOVDQU64 64(DI), Z1
	VMOVDQU64 128(DI), Z2
	VMOVDQU64 192(DI), Z3
	MOVQ $0xC2B2AE3D27D4EB4F, AX
	VPBROADCASTQ AX, Z30
	MOVQ $0x9E3779B185EBCA87, AX
	VPBROADCASTQ AX, Z31
	XORQ DX, DX
	MOVQ $2048, CX

loop:
	// Z4 = chunk 0's stripe | chunk 1's, Z5 = 2 | 3, Z6 = 4 | 5, Z7 = 6 | 7.
	VMOVDQU (SI)(DX*1), Y4
	VINSERTI64X4 $1, (R8)(DX*1), Z4, Z4
	VMOVDQU (R9)(DX*1), Y5
	VINSERTI64X4 $1, (R10)(DX*1), Z5, Z5
	VMOVDQU (R11)(DX*1), Y6
	VINSERTI64X4 $1, (R12)(DX*1), Z6, Z6
	VMOVDQU (R13)(DX*1), Y7
	VINSERTI64X4 $1, (BX)(DX*1), Z7, Z7

	// Transpose: Z12..Z15 = lane 0..3 of the eight stripes.
	VPUNPCKLQDQ Z5, Z4, Z8
	VPUNPCKHQDQ Z5, Z4, Z9
	VPUNPCKLQDQ Z7, Z6, Z10
	VPUNPCKHQDQ Z7, Z6, Z11
	VSHUFI64X2 $0x88, Z10, Z8, Z12
	VSHUFI64X2 $0x88, Z11, Z9, Z13
	VSHUFI64X2 $0xDD, Z10, Z8, Z14
	VSHUFI64X2 $0xDD, Z11, Z9, Z15

	VPMULLQ Z30, Z12, Z12
	VPMULLQ Z30, Z13, Z13
	VPMULLQ Z30, Z14, Z14
	VPMULLQ Z30, Z15, Z15
	VPADDQ Z12, Z0, Z0
	VPADDQ Z13, Z1, Z1
	VPADDQ Z14, Z2, Z2
	VPADDQ Z15, Z3, Z3
	VPROLQ $31, Z0, Z0
	VPROLQ $31, Z1, Z1
	VPROLQ $31, Z2, Z2
	VPROLQ $31, Z3, Z3
	VPMULLQ Z31, Z0, Z0
	VPMULLQ Z31, Z1, Z1
	VPMULLQ Z31, Z2, Z2
	VPMULLQ Z31, Z3, Z3

	ADDQ $32, DX
	DECQ CX
	JNZ loop

	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	VZEROUPPER
	RET
