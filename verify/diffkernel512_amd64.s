//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 statistics kernels: diffkernel_amd64.s's in eight float64
// lanes, the masks in mask registers.

DATA absmask512<>+0(SB)/8, $0x7fffffffffffffff
GLOBL absmask512<>(SB), RODATA|NOPTR, $8

DATA one512<>+0(SB)/8, $1
GLOBL one512<>(SB), RODATA|NOPTR, $8

// ~15: a histogram slot's index with its low four bits cleared
DATA slotmask512<>+0(SB)/8, $0xfffffffffffffff0
GLOBL slotmask512<>(SB), RODATA|NOPTR, $8

// each lane's copy of a histogram slot: 0-7 in the loop's even blocks,
// 8-15 in its odd ones
DATA lanes512<>+0(SB)/8, $0
DATA lanes512<>+8(SB)/8, $1
DATA lanes512<>+16(SB)/8, $2
DATA lanes512<>+24(SB)/8, $3
DATA lanes512<>+32(SB)/8, $4
DATA lanes512<>+40(SB)/8, $5
DATA lanes512<>+48(SB)/8, $6
DATA lanes512<>+56(SB)/8, $7
DATA lanes512<>+64(SB)/8, $8
DATA lanes512<>+72(SB)/8, $9
DATA lanes512<>+80(SB)/8, $10
DATA lanes512<>+88(SB)/8, $11
DATA lanes512<>+96(SB)/8, $12
DATA lanes512<>+104(SB)/8, $13
DATA lanes512<>+112(SB)/8, $14
DATA lanes512<>+120(SB)/8, $15
GLOBL lanes512<>(SB), RODATA|NOPTR, $128

// f32Kernel offsets (TestKernelLayout)
#define K_SUMD2 0
#define K_SUMA2 64
#define K_SUMB2 128
#define K_SUMDS 192
#define K_MAXABS 256
#define K_OVER 320
#define K_RELTHR 384
#define K_ATOL 448
#define K_RTOL 512
#define K_TOLON 576
#define K_HIST 640

// Element loads: eight float32 or bfloat16 elements at index AX, widened
// to float64 in z (a bfloat16 is the high half of a float32; y is the
// low half of z, a scratch register).
#define LOADF32(p, z, y) VCVTPS2PD p(AX*4), z
#define LOADBF16(p, z, y) VPMOVZXWD p(AX*2), y; VPSLLD $16, y, y; VCVTPS2PD y, z

// Registers: SI x, DI y, CX n, DX k, AX the element index, R9 the
// histogram; Z8-Z11 the sums, Z12 max |d|, Z13 the over counts, Z14 the
// abs mask, Z15 zero, Z16 relThr, Z17 atol, Z18 rtol, Z19 the slot mask,
// Z20 and Z22 the lanes' copies, Z21 ones.
#define STATS_ENTER \
	MOVQ x+0(FP), SI; \
	MOVQ y+8(FP), DI; \
	MOVQ n+16(FP), CX; \
	MOVQ k+24(FP), DX; \
	LEAQ K_HIST(DX), R9; \
	VMOVUPD K_SUMD2(DX), Z8; \
	VMOVUPD K_SUMA2(DX), Z9; \
	VMOVUPD K_SUMB2(DX), Z10; \
	VMOVUPD K_SUMDS(DX), Z11; \
	VMOVUPD K_MAXABS(DX), Z12; \
	VMOVDQU64 K_OVER(DX), Z13; \
	VMOVUPD K_RELTHR(DX), Z16; \
	VMOVUPD K_ATOL(DX), Z17; \
	VMOVUPD K_RTOL(DX), Z18; \
	VPBROADCASTQ absmask512<>(SB), Z14; \
	VPBROADCASTQ slotmask512<>(SB), Z19; \
	VMOVDQU64 lanes512<>(SB), Z20; \
	VMOVDQU64 lanes512<>+64(SB), Z22; \
	VPBROADCASTQ one512<>(SB), Z21; \
	VPXORQ Z15, Z15, Z15; \
	MOVQ K_TOLON(DX), R13; \
	XORQ AX, AX

// INC4W(r, t): the increments of the four slots in the 16-bit words of
// r (overwritten), t a scratch register.
#define INC4W(r, t) \
	MOVWQZX r, t; \
	INCQ (R9)(t*8); \
	SHRQ $16, r; \
	MOVWQZX r, t; \
	INCQ (R9)(t*8); \
	SHRQ $16, r; \
	MOVWQZX r, t; \
	INCQ (R9)(t*8); \
	SHRQ $16, r; \
	INCQ (R9)(r*8)

// INC8: the increments of the eight slots in Z6 (each below 2^16: twelve
// bits of d and four of the copy), narrowed to words (VPMOVQW) and moved
// to two general registers: three instructions from the vector unit
// instead of eleven for the lanes one by one.
#define INC8 \
	VPMOVQW Z6, X6; \
	VMOVQ X6, R8; \
	VPEXTRQ $1, X6, R10; \
	INC4W(R8, R11); \
	INC4W(R10, R12)

// STATS_BODY(lanes, notol): Z0 a and Z1 b (eight elements each, float64).
// d = a - b; a block with d NaN or infinite (a or b NaN or infinite, or
// the difference past float64: VFPCLASSPD) or with |d| > relThr*|b| (a
// new maximum relative error, maybe) is left to the Go kernel before
// anything of it is added. Then the sums (FMA), max |d|, the tolerance
// count (|d| > atol + rtol*|b| and d != 0; skipped without a tolerance),
// and the histogram: slot d>>52 (sign and biased exponent), copy lanes
// (the lane's, in the loop's even or odd blocks: one copy's increments
// come no closer than every other block), moved to general registers
// (INC8) and incremented one at a time.
#define STATS_BODY(lanes, notol) \
	VSUBPD Z1, Z0, Z2; \
	VFPCLASSPDZ $0x99, Z2, K1; \
	VANDPD Z14, Z2, Z3; \
	VANDPD Z14, Z1, Z4; \
	VMULPD Z16, Z4, Z5; \
	VCMPPD $0x1e, Z5, Z3, K2; \
	KORTESTB K1, K2; \
	JNE done; \
	VFMADD231PD Z2, Z2, Z8; \
	VFMADD231PD Z0, Z0, Z9; \
	VFMADD231PD Z1, Z1, Z10; \
	VADDPD Z1, Z0, Z7; \
	VFMADD231PD Z7, Z2, Z11; \
	VMAXPD Z3, Z12, Z12; \
	VPSRLQ $48, Z2, Z6; \
	VPTERNLOGQ $0xea, lanes, Z19, Z6; \
	TESTQ R13, R13; \
	JE notol; \
	VMULPD Z18, Z4, Z5; \
	VADDPD Z17, Z5, Z5; \
	VCMPPD $0x1e, Z5, Z3, K3; \
	VCMPPD $4, Z15, Z2, K3, K3; \
	VPADDQ Z21, Z13, K3, Z13; \
notol: \
	INC8

#define STATS_EXIT \
	VMOVUPD Z8, K_SUMD2(DX); \
	VMOVUPD Z9, K_SUMA2(DX); \
	VMOVUPD Z10, K_SUMB2(DX); \
	VMOVUPD Z11, K_SUMDS(DX); \
	VMOVUPD Z12, K_MAXABS(DX); \
	VMOVDQU64 Z13, K_OVER(DX); \
	MOVQ AX, ret+32(FP); \
	VZEROUPPER; \
	RET

// SUMSQ: the squares of the finite elements among CX of SI (sixteen at a
// time: Z0 and Z1 loaded), summed in Z8 and Z9 under the masks of the
// finite ones and counted in Z12 and Z13; out and cnt get the lanes.
#define SUMSQ_BODY \
	VSUBPD Z0, Z0, Z2; \
	VSUBPD Z1, Z1, Z3; \
	VCMPPD $0, Z15, Z2, K1; \
	VCMPPD $0, Z15, Z3, K2; \
	VFMADD231PD Z0, Z0, K1, Z8; \
	VFMADD231PD Z1, Z1, K2, Z9; \
	VPADDQ Z21, Z12, K1, Z12; \
	VPADDQ Z21, Z13, K2, Z13

#define SUMSQ_FUNC(LOAD, HALF) \
	MOVQ x+0(FP), SI; \
	MOVQ n+8(FP), CX; \
	VPXORQ Z8, Z8, Z8; \
	VPXORQ Z9, Z9, Z9; \
	VPXORQ Z12, Z12, Z12; \
	VPXORQ Z13, Z13, Z13; \
	VPXORQ Z15, Z15, Z15; \
	VPBROADCASTQ one512<>(SB), Z21; \
	XORQ AX, AX; \
sqloop: \
	CMPQ AX, CX; \
	JGE  sqdone; \
	LOAD((SI), Z0, Y0); \
	LOAD(HALF(SI), Z1, Y1); \
	SUMSQ_BODY; \
	ADDQ $16, AX; \
	JMP  sqloop; \
sqdone: \
	VADDPD Z9, Z8, Z8; \
	VPADDQ Z13, Z12, Z12; \
	MOVQ out+16(FP), DX; \
	VMOVUPD Z8, (DX); \
	MOVQ cnt+24(FP), DX; \
	VMOVDQU64 Z12, (DX); \
	VZEROUPPER; \
	RET

// STATS_FUNC is a variant's body: LOADA and LOADB load A's and B's
// elements; two blocks of eight a round.
#define STATS_FUNC(LOADA, LOADB) \
	STATS_ENTER; \
loop: \
	CMPQ AX, CX; \
	JGE  done; \
	LOADA((SI), Z0, Y0); \
	LOADB((DI), Z1, Y1); \
	STATS_BODY(Z20, notol1); \
	ADDQ $8, AX; \
	CMPQ AX, CX; \
	JGE  done; \
	LOADA((SI), Z0, Y0); \
	LOADB((DI), Z1, Y1); \
	STATS_BODY(Z22, notol2); \
	ADDQ $8, AX; \
	JMP  loop; \
done: \
	STATS_EXIT

// func statsF32F32AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsF32F32AVX512(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADF32, LOADF32)

// func statsF32BF16AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsF32BF16AVX512(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADF32, LOADBF16)

// func statsBF16F32AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16F32AVX512(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADBF16, LOADF32)

// func statsBF16BF16AVX512(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16BF16AVX512(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADBF16, LOADBF16)

// func sumSqF32AVX512(x unsafe.Pointer, n int, out *[8]float64, cnt *[8]int64)
TEXT ·sumSqF32AVX512(SB), NOSPLIT, $0-32
	SUMSQ_FUNC(LOADF32, 32)

// func sumSqBF16AVX512(x unsafe.Pointer, n int, out *[8]float64, cnt *[8]int64)
TEXT ·sumSqBF16AVX512(SB), NOSPLIT, $0-32
	SUMSQ_FUNC(LOADBF16, 16)
