//go:build amd64 && !purego

#include "textflag.h"

// Constants of statsF32AVX2, four qwords each.
DATA absmask<>+0(SB)/8, $0x7fffffffffffffff
DATA absmask<>+8(SB)/8, $0x7fffffffffffffff
DATA absmask<>+16(SB)/8, $0x7fffffffffffffff
DATA absmask<>+24(SB)/8, $0x7fffffffffffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $32

// each lane's copy of a histogram slot: lanes 0-3 for the loop's even
// blocks, 4-7 for its odd ones
DATA laneoff<>+0(SB)/8, $0
DATA laneoff<>+8(SB)/8, $1
DATA laneoff<>+16(SB)/8, $2
DATA laneoff<>+24(SB)/8, $3
GLOBL laneoff<>(SB), RODATA|NOPTR, $32

DATA laneoff2<>+0(SB)/8, $4
DATA laneoff2<>+8(SB)/8, $5
DATA laneoff2<>+16(SB)/8, $6
DATA laneoff2<>+24(SB)/8, $7
GLOBL laneoff2<>(SB), RODATA|NOPTR, $32

// f32Kernel offsets
#define K_SUMD2 0
#define K_SUMA2 64
#define K_SUMB2 128
#define K_SUMDS 192
#define K_MAXABS 256
#define K_OVER 320
#define K_RELTHR 384
#define K_ATOL 448
#define K_RTOL 512
#define K_HIST 640

// Element loads: four float32 or bfloat16 elements at index AX, widened
// to float64 in y (a bfloat16 is the high half of a float32; x is y's
// low half).
#define LOADF32(p, y, x) VCVTPS2PD p(AX*4), y
#define LOADBF16(p, y, x) VPMOVZXWD p(AX*2), x; VPSLLD $16, x, x; VCVTPS2PD x, y

// The statsAVX2 variants: SI x, DI y, CX n, DX k, AX the element index;
// Y8-Y11 the sums, Y12 max |d|, Y13 the over counts (less the true
// masks, -1), Y14 the abs mask, Y15 zero; 32 bytes of frame for the
// histogram slots.
#define STATS_ENTER \
	MOVQ x+0(FP), SI; \
	MOVQ y+8(FP), DI; \
	MOVQ n+16(FP), CX; \
	MOVQ k+24(FP), DX; \
	LEAQ K_HIST(DX), R9; \
	VMOVUPD K_SUMD2(DX), Y8; \
	VMOVUPD K_SUMA2(DX), Y9; \
	VMOVUPD K_SUMB2(DX), Y10; \
	VMOVUPD K_SUMDS(DX), Y11; \
	VMOVUPD K_MAXABS(DX), Y12; \
	VMOVDQU K_OVER(DX), Y13; \
	VMOVUPD absmask<>(SB), Y14; \
	VXORPD Y15, Y15, Y15; \
	XORQ AX, AX

// STATS_BODY: Y0 a and Y1 b (four elements each, float64). d = a - b
// (exact but for far exponents); a block whose d - d is unordered (a or
// b NaN or infinite) or with |d| > relThr*|b| (a new maximum relative
// error, maybe) is left to the Go kernel (JNE done) before anything of it
// is added. Then the sums (FMA), max |d|, the tolerance count (|d| >
// atol + rtol*|b| and d != 0), and the histogram: slot d>>52 (sign and
// biased exponent), copy lanes (the loop's even blocks count in copies
// 0-3, its odd ones in 4-7, so that one slot's increments in a row do not
// wait on each other), incremented one lane at a time.
#define STATS_BODY(lanes) \
	VSUBPD Y1, Y0, Y2; \
	VSUBPD Y2, Y2, Y3; \
	VCMPPD $3, Y3, Y3, Y3; \
	VANDPD Y14, Y2, Y4; \
	VANDPD Y14, Y1, Y5; \
	VMULPD K_RELTHR(DX), Y5, Y6; \
	VCMPPD $0x1e, Y6, Y4, Y7; \
	VORPD Y3, Y7, Y7; \
	VPTEST Y7, Y7; \
	JNE done; \
	VFMADD231PD Y2, Y2, Y8; \
	VFMADD231PD Y0, Y0, Y9; \
	VFMADD231PD Y1, Y1, Y10; \
	VADDPD Y1, Y0, Y3; \
	VFMADD231PD Y3, Y2, Y11; \
	VMAXPD Y4, Y12, Y12; \
	VCMPPD $0, Y15, Y2, Y3; \
	VMULPD K_RTOL(DX), Y5, Y6; \
	VADDPD K_ATOL(DX), Y6, Y6; \
	VCMPPD $0x1e, Y6, Y4, Y7; \
	VANDNPD Y7, Y3, Y7; \
	VPSUBQ Y7, Y13, Y13; \
	VPSRLQ $52, Y2, Y5; \
	VPSLLQ $4, Y5, Y5; \
	VPOR lanes, Y5, Y5; \
	VMOVQ X5, R8; \
	VPEXTRQ $1, X5, R10; \
	VEXTRACTI128 $1, Y5, X6; \
	VMOVQ X6, R11; \
	VPEXTRQ $1, X6, R12; \
	INCQ (R9)(R8*8); \
	INCQ (R9)(R10*8); \
	INCQ (R9)(R11*8); \
	INCQ (R9)(R12*8)

#define STATS_EXIT \
	VMOVUPD Y8, K_SUMD2(DX); \
	VMOVUPD Y9, K_SUMA2(DX); \
	VMOVUPD Y10, K_SUMB2(DX); \
	VMOVUPD Y11, K_SUMDS(DX); \
	VMOVUPD Y12, K_MAXABS(DX); \
	VMOVDQU Y13, K_OVER(DX); \
	MOVQ AX, ret+32(FP); \
	VZEROUPPER; \
	RET

// SUMSQ: the squares of the finite elements among CX of SI (eight at a
// time: Y0 and Y1 loaded), summed in Y8 and Y9 and counted (less the
// masks) in Y12 and Y13; out and cnt get the lanes.
#define SUMSQ_BODY \
	VSUBPD Y0, Y0, Y2; \
	VSUBPD Y1, Y1, Y3; \
	VCMPPD $0, Y15, Y2, Y2; \
	VCMPPD $0, Y15, Y3, Y3; \
	VANDPD Y2, Y0, Y0; \
	VANDPD Y3, Y1, Y1; \
	VFMADD231PD Y0, Y0, Y8; \
	VFMADD231PD Y1, Y1, Y9; \
	VPSUBQ Y2, Y12, Y12; \
	VPSUBQ Y3, Y13, Y13

#define SUMSQ_ENTER \
	MOVQ x+0(FP), SI; \
	MOVQ n+8(FP), CX; \
	VXORPD Y8, Y8, Y8; \
	VXORPD Y9, Y9, Y9; \
	VPXOR Y12, Y12, Y12; \
	VPXOR Y13, Y13, Y13; \
	VXORPD Y15, Y15, Y15; \
	XORQ AX, AX

#define SUMSQ_EXIT \
	VADDPD Y9, Y8, Y8; \
	VPADDQ Y13, Y12, Y12; \
	MOVQ out+16(FP), DX; \
	VMOVUPD Y8, (DX); \
	MOVQ cnt+24(FP), DX; \
	VMOVDQU Y12, (DX); \
	VZEROUPPER; \
	RET

// STATS_FUNC is a statsAVX2 variant's body: LOADA and LOADB load A's and
// B's elements; two blocks a round, in histogram copies 0-3 and 4-7.
#define STATS_FUNC(LOADA, LOADB) \
	STATS_ENTER; \
loop: \
	CMPQ AX, CX; \
	JGE  done; \
	LOADA((SI), Y0, X0); \
	LOADB((DI), Y1, X1); \
	STATS_BODY(laneoff<>(SB)); \
	ADDQ $4, AX; \
	CMPQ AX, CX; \
	JGE  done; \
	LOADA((SI), Y0, X0); \
	LOADB((DI), Y1, X1); \
	STATS_BODY(laneoff2<>(SB)); \
	ADDQ $4, AX; \
	JMP  loop; \
done: \
	STATS_EXIT

// func statsF32F32(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsF32F32(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADF32, LOADF32)

// func statsF32BF16(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsF32BF16(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADF32, LOADBF16)

// func statsBF16F32(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16F32(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADBF16, LOADF32)

// func statsBF16BF16(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16BF16(SB), NOSPLIT, $0-40
	STATS_FUNC(LOADBF16, LOADBF16)

// SUMSQ_FUNC is a sumSq variant's body: LOAD loads four elements, HALF
// the bytes of four.
#define SUMSQ_FUNC(LOAD, HALF) \
	SUMSQ_ENTER; \
sqloop: \
	CMPQ AX, CX; \
	JGE  sqdone; \
	LOAD((SI), Y0, X0); \
	LOAD(HALF(SI), Y1, X1); \
	SUMSQ_BODY; \
	ADDQ $8, AX; \
	JMP  sqloop; \
sqdone: \
	SUMSQ_EXIT

// func sumSqF32(x unsafe.Pointer, n int, out *[4]float64, cnt *[4]int64)
TEXT ·sumSqF32(SB), NOSPLIT, $0-32
	SUMSQ_FUNC(LOADF32, 16)

// func sumSqBF16(x unsafe.Pointer, n int, out *[4]float64, cnt *[4]int64)
TEXT ·sumSqBF16(SB), NOSPLIT, $0-32
	SUMSQ_FUNC(LOADBF16, 8)
