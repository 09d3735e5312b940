//go:build amd64 && !purego

#include "textflag.h"

// SSE2 kernels for the hottest dequantizers. They do exactly the float32
// operations of the Go (and ggml's C) code, four lanes at a time: int to
// float conversion (exact), one multiply, one subtract, each rounded.

// EXPAND8S sign-extends the low 8 bytes of X (int8) into two vectors of
// int32, converts them to float and stores X*D at OFF(DI), OFF+16(DI).
// Clobbers X12, X13.
#define EXPAND8S(X, D, OFF) \
	MOVO X, X12 \
	PUNPCKLBW X12, X12 \
	PSRAW $8, X12 \
	MOVO X12, X13 \
	PUNPCKLWL X13, X13 \
	PSRAL $16, X13 \
	PUNPCKHWL X12, X12 \
	PSRAL $16, X12 \
	CVTPL2PS X13, X13 \
	MULPS D, X13 \
	MOVUPS X13, OFF(DI) \
	CVTPL2PS X12, X12 \
	MULPS D, X12 \
	MOVUPS X12, OFF+16(DI)

// func deqQ8SSE(src *byte, dst *float32, scales *float32, nb int, stride int)
TEXT ·deqQ8SSE(SB), NOSPLIT, $0-40
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ scales+16(FP), DX
	MOVQ nb+24(FP), CX
	MOVQ stride+32(FP), BX
	TESTQ CX, CX
	JLE q8done
	// Point SI at the quants: the last 32 bytes of the block.
	LEAQ -32(SI)(BX*1), SI
q8loop:
	MOVSS (DX), X7
	SHUFPS $0, X7, X7
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	EXPAND8S(X0, X7, 0)
	PSRLO $8, X0
	EXPAND8S(X0, X7, 32)
	EXPAND8S(X1, X7, 64)
	PSRLO $8, X1
	EXPAND8S(X1, X7, 96)
	ADDQ BX, SI
	ADDQ $128, DI
	ADDQ $4, DX
	DECQ CX
	JNZ q8loop
q8done:
	RET

// EXPAND8U zero-extends the low 8 bytes of X (uint8, X6 = 0) into two
// vectors of int32, converts them and stores X*D-M at OFF(DI), OFF+16(DI).
#define EXPAND8U(X, D, M, OFF) \
	MOVO X, X12 \
	PUNPCKLBW X6, X12 \
	MOVO X12, X13 \
	PUNPCKLWL X6, X13 \
	PUNPCKHWL X6, X12 \
	CVTPL2PS X13, X13 \
	MULPS D, X13 \
	SUBPS M, X13 \
	MOVUPS X13, OFF(DI) \
	CVTPL2PS X12, X12 \
	MULPS D, X12 \
	SUBPS M, X12 \
	MOVUPS X12, OFF+16(DI)

// func deqQ4KSSE(src *byte, dst *float32, params *float32, nb int)
// params holds, per block, four groups of (d1, m1, d2, m2).
TEXT ·deqQ4KSSE(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ params+16(FP), DX
	MOVQ nb+24(FP), CX
	TESTQ CX, CX
	JLE q4kdone
	PXOR X6, X6
	MOVL $0x0F0F0F0F, AX
	MOVQ AX, X5
	PSHUFL $0, X5, X5
q4kblock:
	LEAQ 16(SI), R8
	MOVQ $4, BX
q4kgroup:
	MOVSS 0(DX), X8
	SHUFPS $0, X8, X8
	MOVSS 4(DX), X9
	SHUFPS $0, X9, X9
	MOVSS 8(DX), X10
	SHUFPS $0, X10, X10
	MOVSS 12(DX), X11
	SHUFPS $0, X11, X11
	MOVOU 0(R8), X0
	MOVOU 16(R8), X1
	MOVO X0, X2
	PAND X5, X2
	PSRLW $4, X0
	PAND X5, X0
	MOVO X1, X3
	PAND X5, X3
	PSRLW $4, X1
	PAND X5, X1
	// Low nibbles: elements 0..31 of the group of 64.
	EXPAND8U(X2, X8, X9, 0)
	PSRLO $8, X2
	EXPAND8U(X2, X8, X9, 32)
	EXPAND8U(X3, X8, X9, 64)
	PSRLO $8, X3
	EXPAND8U(X3, X8, X9, 96)
	// High nibbles: elements 32..63.
	EXPAND8U(X0, X10, X11, 128)
	PSRLO $8, X0
	EXPAND8U(X0, X10, X11, 160)
	EXPAND8U(X1, X10, X11, 192)
	PSRLO $8, X1
	EXPAND8U(X1, X10, X11, 224)
	ADDQ $32, R8
	ADDQ $256, DI
	ADDQ $16, DX
	DECQ BX
	JNZ q4kgroup
	ADDQ $144, SI
	DECQ CX
	JNZ q4kblock
q4kdone:
	RET
