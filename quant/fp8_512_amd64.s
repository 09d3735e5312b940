//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 kernels of fp8_seg.go: 64 float8 codes a step, looked up in
// byte tables, times their block's scale, to bfloat16, float16 or
// float32. R8 points at the fp8Tab512 (perm 0, lo 64, hi 192, sign
// 320). Registers: Z20 perm, Z21/Z22 the low bytes' table halves,
// Z23/Z24 the high bytes', Z25 0x80s, Z26 zero, Z27 the block's scale;
// Z0-Z7 the step; K1-K4 its NaN or subnormal products.

// VCVTNEPS2BF16 Zn, Yn (n < 8): the Go assembler does not know it.
// EVEX.512.F3.0F38.W0 72 /r.
#define CVTBF16(MODRM) \
	BYTE $0x62; BYTE $0xF2; BYTE $0x7E; BYTE $0x48; BYTE $0x72; BYTE MODRM

// STEP leaves in Z4-Z7 the float32 products of the 64 codes at (SI),
// elements 0-15, 16-31, 32-47, 48-63, and jumps to OUT when one of them
// is a NaN or a subnormal.
#define STEP(OUT) \
	VMOVDQU64 (SI), Z0 \
	VPERMB Z0, Z20, Z0 \
	VMOVDQA64 Z21, Z1 \
	VPERMT2B Z22, Z0, Z1 \
	VMOVDQA64 Z23, Z2 \
	VPERMT2B Z24, Z0, Z2 \
	VPTERNLOGD $0xF8, Z25, Z0, Z2 \
	VPUNPCKLBW Z2, Z1, Z3 \
	VPUNPCKHBW Z2, Z1, Z1 \
	VPUNPCKLWD Z3, Z26, Z4 \
	VPUNPCKHWD Z3, Z26, Z5 \
	VPUNPCKLWD Z1, Z26, Z6 \
	VPUNPCKHWD Z1, Z26, Z7 \
	VMULPS Z27, Z4, Z4 \
	VMULPS Z27, Z5, Z5 \
	VMULPS Z27, Z6, Z6 \
	VMULPS Z27, Z7, Z7 \
	VFPCLASSPSZ $0xA1, Z4, K1 \
	VFPCLASSPSZ $0xA1, Z5, K2 \
	VFPCLASSPSZ $0xA1, Z6, K3 \
	VFPCLASSPSZ $0xA1, Z7, K4 \
	KORW K2, K1, K1 \
	KORW K4, K3, K3 \
	KORTESTW K3, K1 \
	JNZ OUT

// KERNEL is one kernel's body (dst, src *byte, n int, scales *float32,
// bw, off int, t *fp8Tab512) int: STORE writes Z4-Z7 at (DI), ES bytes
// an element.
#define KERNEL(STORE, ES, BLOCK, CHUNK, DONE) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	MOVQ scales+24(FP), R11 \
	MOVQ bw+32(FP), R12 \
	MOVQ off+40(FP), R13 \
	MOVQ t+48(FP), R8 \
	VMOVDQU64 0(R8), Z20 \
	VMOVDQU64 64(R8), Z21 \
	VMOVDQU64 128(R8), Z22 \
	VMOVDQU64 192(R8), Z23 \
	VMOVDQU64 256(R8), Z24 \
	VMOVDQU64 320(R8), Z25 \
	VPXORD Z26, Z26, Z26 \
	XORQ R9, R9 \
BLOCK: \
	TESTQ CX, CX \
	JZ DONE \
	VBROADCASTSS (R11), Z27 \
	ADDQ $4, R11 \
	MOVQ R12, R10 \
	SUBQ R13, R10 \
	XORQ R13, R13 \
	CMPQ R10, CX \
	CMOVQGT CX, R10 \
	SUBQ R10, CX \
	SHRQ $6, R10 \
CHUNK: \
	STEP(DONE) \
	STORE \
	ADDQ $64, SI \
	ADDQ $(64*ES), DI \
	ADDQ $64, R9 \
	DECQ R10 \
	JNZ CHUNK \
	JMP BLOCK \
DONE: \
	MOVQ R9, ret+56(FP) \
	VZEROUPPER \
	RET

#define STOREBF16 \
	CVTBF16($0xE4) \
	CVTBF16($0xED) \
	CVTBF16($0xF6) \
	CVTBF16($0xFF) \
	VMOVDQU Y4, (DI) \
	VMOVDQU Y5, 32(DI) \
	VMOVDQU Y6, 64(DI) \
	VMOVDQU Y7, 96(DI)

#define STOREF16 \
	VCVTPS2PH $0, Z4, Y4 \
	VCVTPS2PH $0, Z5, Y5 \
	VCVTPS2PH $0, Z6, Y6 \
	VCVTPS2PH $0, Z7, Y7 \
	VMOVDQU Y4, (DI) \
	VMOVDQU Y5, 32(DI) \
	VMOVDQU Y6, 64(DI) \
	VMOVDQU Y7, 96(DI)

#define STOREF32 \
	VMOVDQU64 Z4, (DI) \
	VMOVDQU64 Z5, 64(DI) \
	VMOVDQU64 Z6, 128(DI) \
	VMOVDQU64 Z7, 192(DI)

// func fp8BF16AVX512(dst, src *byte, n int, scales *float32, bw, off int, t *fp8Tab512) int
TEXT ·fp8BF16AVX512(SB), NOSPLIT, $0-64
	KERNEL(STOREBF16, 2, bblock, bchunk, bdone)

// func fp8F16AVX512(dst, src *byte, n int, scales *float32, bw, off int, t *fp8Tab512) int
TEXT ·fp8F16AVX512(SB), NOSPLIT, $0-64
	KERNEL(STOREF16, 2, hblock, hchunk, hdone)

// func fp8F32AVX512(dst, src *byte, n int, scales *float32, bw, off int, t *fp8Tab512) int
TEXT ·fp8F32AVX512(SB), NOSPLIT, $0-64
	KERNEL(STOREF32, 4, fblock, fchunk, fdone)
