//go:build amd64 && !purego

#include "textflag.h"

// mergeBF16x4AVX512: four rows of a bfloat16 weight merged with one
// adapter and encoded back to bfloat16, 64 columns (four registers of 16
// float32 lanes per row) at a time. Per column chunk: d = the rank sum,
// one fused multiply-add per term in k order (rm's row k loaded once for
// the four rows, l[row, k] broadcast per row: 16 accumulators, so the
// kernel is bound by the FMA ports, not by loads or FMA latency); then
// per register c = bf16 decode (a shift), c + float32(s * d) rounded
// twice, and the bfloat16 encode (u + 0x7fff + (u>>16)&1) >> 16 with
// every NaN to 0x7fc0: the operations and roundings of addTileGo and
// dtype's F32ToBF16, in the same order.

#define FMA4(B, A0, A1, A2, A3) \
	VFMADD231PS Z16, B, A0 \
	VFMADD231PS Z17, B, A1 \
	VFMADD231PS Z18, B, A2 \
	VFMADD231PS Z19, B, A3

// FINISH(ACC, SRC, DST): one register of 16 columns of one row.
#define FINISH(ACC, SRC, DST) \
	VPMOVZXWD SRC, Z24 \
	VPSLLD $16, Z24, Z24 \
	VMULPS Z31, ACC, ACC \
	VADDPS ACC, Z24, ACC \
	VPSRLD $16, ACC, Z25 \
	VPANDD Z30, Z25, Z25 \
	VPADDD Z29, ACC, Z26 \
	VPADDD Z25, Z26, Z26 \
	VPSRLD $16, Z26, Z26 \
	VCMPPS $3, ACC, ACC, K1 \
	VMOVDQU32 Z28, K1, Z26 \
	VPMOVDW Z26, DST

// func mergeBF16x4AVX512(dst, src *byte, stride int, l *float32, r int, rm *float32, n, cols int, s float32)
TEXT ·mergeBF16x4AVX512(SB), NOSPLIT, $0-68
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), BX
	LEAQ (BX)(BX*2), R15 // 3 * stride
	MOVQ l+24(FP), CX
	MOVQ r+32(FP), R9
	LEAQ 0(R9*4), R14 // one row of l, bytes
	LEAQ (R14)(R14*2), AX // three rows
	MOVQ rm+40(FP), DX
	MOVQ n+48(FP), R8
	SHLQ $2, R8
	MOVQ cols+56(FP), R10
	VBROADCASTSS s+64(FP), Z31
	MOVL $1, R11
	VPBROADCASTD R11, Z30
	MOVL $0x7fff, R11
	VPBROADCASTD R11, Z29
	MOVL $0x7fc0, R11
	VPBROADCASTD R11, Z28
	TESTQ R9, R9
	JLE done
colloop:
	CMPQ R10, $64
	JLT done
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ DX, R11
	MOVQ CX, R12
	MOVQ R9, R13
kloop:
	VMOVUPS 0(R11), Z16
	VMOVUPS 64(R11), Z17
	VMOVUPS 128(R11), Z18
	VMOVUPS 192(R11), Z19
	VBROADCASTSS (R12), Z20
	VBROADCASTSS (R12)(R14*1), Z21
	VBROADCASTSS (R12)(R14*2), Z22
	VBROADCASTSS (R12)(AX*1), Z23
	FMA4(Z20, Z0, Z1, Z2, Z3)
	FMA4(Z21, Z4, Z5, Z6, Z7)
	FMA4(Z22, Z8, Z9, Z10, Z11)
	FMA4(Z23, Z12, Z13, Z14, Z15)
	ADDQ $4, R12
	ADDQ R8, R11
	DECQ R13
	JNZ kloop
	FINISH(Z0, 0(SI), 0(DI))
	FINISH(Z1, 32(SI), 32(DI))
	FINISH(Z2, 64(SI), 64(DI))
	FINISH(Z3, 96(SI), 96(DI))
	FINISH(Z4, 0(SI)(BX*1), 0(DI)(BX*1))
	FINISH(Z5, 32(SI)(BX*1), 32(DI)(BX*1))
	FINISH(Z6, 64(SI)(BX*1), 64(DI)(BX*1))
	FINISH(Z7, 96(SI)(BX*1), 96(DI)(BX*1))
	FINISH(Z8, 0(SI)(BX*2), 0(DI)(BX*2))
	FINISH(Z9, 32(SI)(BX*2), 32(DI)(BX*2))
	FINISH(Z10, 64(SI)(BX*2), 64(DI)(BX*2))
	FINISH(Z11, 96(SI)(BX*2), 96(DI)(BX*2))
	FINISH(Z12, 0(SI)(R15*1), 0(DI)(R15*1))
	FINISH(Z13, 32(SI)(R15*1), 32(DI)(R15*1))
	FINISH(Z14, 64(SI)(R15*1), 64(DI)(R15*1))
	FINISH(Z15, 96(SI)(R15*1), 96(DI)(R15*1))
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $256, DX
	SUBQ $64, R10
	JMP colloop
done:
	VZEROUPPER
	RET
