//go:build amd64 && !purego

#include "textflag.h"

// mxfp4T16AVX2: one 32-element group of 16 consecutive stored rows of
// gpt-oss MXFP4 to bfloat16 in the transformers layout (mxfp4_vec.go).
// The 16 rows' 16 code bytes are transposed (three unpack stages and a
// qword permute, rows k and k+8 in the two lanes of Yk), then each byte
// position's low and high nibbles look up the bfloat16 of their E2M1
// value (VPSHUFB on two 16-entry byte tables), and each stored row's
// scale is added to the exponent field of its nonzero values.
// Register use: Y0-Y7 the rows, then byte positions; Y8, Y9 the tables;
// Y10-Y15 temporaries. R8 points at mxfp4VecConsts (c0f 0, c7fff 32,
// zero 64), AX at the 16 exponent adjustments.

// ADJ adds the exponent adjustment to the nonzero values of Y. Clobbers Y14.
#define ADJ(Y) \
	VPAND 32(R8), Y, Y14 \
	VPCMPEQW 64(R8), Y14, Y14 \
	VPANDN (AX), Y14, Y14 \
	VPADDW Y14, Y, Y

// NIB looks up the nibbles in N (bytes, lanes two byte positions) and
// stores lane 0's 16 values at (P0) and lane 1's at (P1). Clobbers Y12-Y15.
#define NIB(N, P0, P1) \
	VPSHUFB N, Y8, Y12 \
	VPSHUFB N, Y9, Y13 \
	VPUNPCKLBW Y13, Y12, Y14 \
	VPUNPCKHBW Y13, Y12, Y15 \
	VPERM2I128 $0x20, Y15, Y14, Y12 \
	VPERM2I128 $0x31, Y15, Y14, Y13 \
	ADJ(Y12) \
	ADJ(Y13) \
	VMOVDQU Y12, P0 \
	VMOVDQU Y13, P1

// POS writes elements 4k..4k+3 from YK (byte positions 2k, 2k+1): row
// pointers R10 (element 4k) and R11 (4k+2), BX the output row stride.
#define POS(YK) \
	VPAND 0(R8), YK, Y10 \
	VPSRLW $4, YK, Y11 \
	VPAND 0(R8), Y11, Y11 \
	NIB(Y10, (R10), (R11)) \
	NIB(Y11, (R10)(BX*1), (R11)(BX*1)) \
	LEAQ (R10)(BX*4), R10 \
	LEAQ (R11)(BX*4), R11

// LOADROW puts stored rows K (at R12) and K+8 (at R13) in YK, then
// steps both pointers by the stored row stride CX.
#define LOADROW(YK, XK) \
	VMOVDQU (R12), XK \
	VINSERTI128 $1, (R13), YK, YK \
	ADDQ CX, R12 \
	ADDQ CX, R13

// UNPACK pairs (A, B) into A = low interleave, B = high. Clobbers Y10.
#define UNPACK(OP_LO, OP_HI, A, B) \
	OP_LO B, A, Y10 \
	OP_HI B, A, B \
	VMOVDQA Y10, A

// func mxfp4T16AVX2(dst *byte, rowStride int, src *byte, srcStride int, adj *[16]uint16, k *mxfp4VecConsts)
TEXT ·mxfp4T16AVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R10
	MOVQ rowStride+8(FP), BX
	MOVQ src+16(FP), R12
	MOVQ srcStride+24(FP), CX
	MOVQ adj+32(FP), AX
	MOVQ k+40(FP), R8
	LEAQ (R12)(CX*8), R13
	LOADROW(Y0, X0)
	LOADROW(Y1, X1)
	LOADROW(Y2, X2)
	LOADROW(Y3, X3)
	LOADROW(Y4, X4)
	LOADROW(Y5, X5)
	LOADROW(Y6, X6)
	LOADROW(Y7, X7)
	VMOVDQU 96(R8), Y8
	VMOVDQU 128(R8), Y9
	// Stage 1, bytes: (0,1) (2,3) (4,5) (6,7).
	UNPACK(VPUNPCKLBW, VPUNPCKHBW, Y0, Y1)
	UNPACK(VPUNPCKLBW, VPUNPCKHBW, Y2, Y3)
	UNPACK(VPUNPCKLBW, VPUNPCKHBW, Y4, Y5)
	UNPACK(VPUNPCKLBW, VPUNPCKHBW, Y6, Y7)
	// Stage 2, words: (0,2) (1,3) (4,6) (5,7).
	UNPACK(VPUNPCKLWD, VPUNPCKHWD, Y0, Y2)
	UNPACK(VPUNPCKLWD, VPUNPCKHWD, Y1, Y3)
	UNPACK(VPUNPCKLWD, VPUNPCKHWD, Y4, Y6)
	UNPACK(VPUNPCKLWD, VPUNPCKHWD, Y5, Y7)
	// Stage 3, dwords: (0,4) (2,6) (1,5) (3,7).
	UNPACK(VPUNPCKLDQ, VPUNPCKHDQ, Y0, Y4)
	UNPACK(VPUNPCKLDQ, VPUNPCKHDQ, Y2, Y6)
	UNPACK(VPUNPCKLDQ, VPUNPCKHDQ, Y1, Y5)
	UNPACK(VPUNPCKLDQ, VPUNPCKHDQ, Y3, Y7)
	VPERMQ $0xD8, Y0, Y0
	VPERMQ $0xD8, Y1, Y1
	VPERMQ $0xD8, Y2, Y2
	VPERMQ $0xD8, Y3, Y3
	VPERMQ $0xD8, Y4, Y4
	VPERMQ $0xD8, Y5, Y5
	VPERMQ $0xD8, Y6, Y6
	VPERMQ $0xD8, Y7, Y7
	LEAQ (R10)(BX*2), R11
	// Byte positions 0,1: Y0; 2,3: Y4; 4,5: Y2; 6,7: Y6; 8,9: Y1;
	// 10,11: Y5; 12,13: Y3; 14,15: Y7.
	POS(Y0)
	POS(Y4)
	POS(Y2)
	POS(Y6)
	POS(Y1)
	POS(Y5)
	POS(Y3)
	POS(Y7)
	VZEROUPPER
	RET
