//go:build amd64 && !purego

#include "textflag.h"

// Constants of statsF32AVX2, four qwords each.
DATA absmask<>+0(SB)/8, $0x7fffffffffffffff
DATA absmask<>+8(SB)/8, $0x7fffffffffffffff
DATA absmask<>+16(SB)/8, $0x7fffffffffffffff
DATA absmask<>+24(SB)/8, $0x7fffffffffffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $32

DATA expmask<>+0(SB)/8, $0x7ff
DATA expmask<>+8(SB)/8, $0x7ff
DATA expmask<>+16(SB)/8, $0x7ff
DATA expmask<>+24(SB)/8, $0x7ff
GLOBL expmask<>(SB), RODATA|NOPTR, $32

// sign*128 (histNeg) after the exponent's shift by 4 more bits
DATA negslot<>+0(SB)/8, $128
DATA negslot<>+8(SB)/8, $128
DATA negslot<>+16(SB)/8, $128
DATA negslot<>+24(SB)/8, $128
GLOBL negslot<>(SB), RODATA|NOPTR, $32

// biased exponent E of |d| to bin: E - 1022 - histLo = E - 942
DATA binbias<>+0(SB)/8, $942
DATA binbias<>+8(SB)/8, $942
DATA binbias<>+16(SB)/8, $942
DATA binbias<>+24(SB)/8, $942
GLOBL binbias<>(SB), RODATA|NOPTR, $32

// HistogramBins - 1
DATA lastbin<>+0(SB)/8, $119
DATA lastbin<>+8(SB)/8, $119
DATA lastbin<>+16(SB)/8, $119
DATA lastbin<>+24(SB)/8, $119
GLOBL lastbin<>(SB), RODATA|NOPTR, $32

// histZero
DATA zeroslot<>+0(SB)/8, $120
DATA zeroslot<>+8(SB)/8, $120
DATA zeroslot<>+16(SB)/8, $120
DATA zeroslot<>+24(SB)/8, $120
GLOBL zeroslot<>(SB), RODATA|NOPTR, $32

// each lane's histogram, in int64s from f32Kernel.hist
DATA laneoff<>+0(SB)/8, $0
DATA laneoff<>+8(SB)/8, $256
DATA laneoff<>+16(SB)/8, $512
DATA laneoff<>+24(SB)/8, $768
GLOBL laneoff<>(SB), RODATA|NOPTR, $32

// f32Kernel offsets
#define K_SUMD2 0
#define K_SUMA2 32
#define K_SUMB2 64
#define K_SUMAB 96
#define K_MAXABS 128
#define K_OVER 160
#define K_RELTHR 192
#define K_ATOL 224
#define K_RTOL 256
#define K_HIST 288

// func statsF32AVX2(x, y *float32, n int, k *f32Kernel) int
// Y8-Y11 sums, Y12 max |d|, Y13 over counts (less the true masks, -1), Y14 abs mask, Y15 zero.
TEXT ·statsF32AVX2(SB), NOSPLIT, $32-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX
	LEAQ K_HIST(DX), R9
	VMOVUPD K_SUMD2(DX), Y8
	VMOVUPD K_SUMA2(DX), Y9
	VMOVUPD K_SUMB2(DX), Y10
	VMOVUPD K_SUMAB(DX), Y11
	VMOVUPD K_MAXABS(DX), Y12
	VMOVDQU K_OVER(DX), Y13
	VMOVUPD absmask<>(SB), Y14
	VXORPD Y15, Y15, Y15
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE done
	VCVTPS2PD (SI)(AX*4), Y0 // a
	VCVTPS2PD (DI)(AX*4), Y1 // b
	VSUBPD Y1, Y0, Y2        // d = a - b, exact but for far exponents
	VSUBPD Y2, Y2, Y3
	VCMPPD $3, Y3, Y3, Y3    // d - d unordered: a or b NaN or infinite
	VANDPD Y14, Y2, Y4       // |d|
	VANDPD Y14, Y1, Y5       // |b|
	VMULPD K_RELTHR(DX), Y5, Y6
	VCMPPD $0x1e, Y6, Y4, Y7 // |d| > relThr*|b|: a maximum relative error, maybe
	VORPD Y3, Y7, Y7
	VPTEST Y7, Y7
	JNE done                 // the Go kernel does this block

	VFMADD231PD Y2, Y2, Y8
	VFMADD231PD Y0, Y0, Y9
	VFMADD231PD Y1, Y1, Y10
	VFMADD231PD Y1, Y0, Y11
	VMAXPD Y4, Y12, Y12
	VCMPPD $0, Y15, Y2, Y3   // d == 0
	VMULPD K_RTOL(DX), Y5, Y6
	VADDPD K_ATOL(DX), Y6, Y6
	VCMPPD $0x1e, Y6, Y4, Y7 // |d| > atol + rtol*|b|
	VANDNPD Y7, Y3, Y7       // and d != 0
	VPSUBQ Y7, Y13, Y13

	// histogram slot: sign*128 + min(max(E-942, 0), 119), 120 for d == 0
	VPSRLQ $52, Y2, Y4       // sign<<11 | E
	VPAND expmask<>(SB), Y4, Y5
	VPSRLQ $4, Y4, Y4
	VPAND negslot<>(SB), Y4, Y4
	VPSUBD binbias<>(SB), Y5, Y5
	VPMAXSD Y15, Y5, Y5
	VPMINSD lastbin<>(SB), Y5, Y5
	VPOR Y4, Y5, Y5
	VBLENDVPD Y3, zeroslot<>(SB), Y5, Y5
	VPADDQ laneoff<>(SB), Y5, Y5
	VMOVDQU Y5, 0(SP)
	MOVQ 0(SP), R8
	INCQ (R9)(R8*8)
	MOVQ 8(SP), R8
	INCQ (R9)(R8*8)
	MOVQ 16(SP), R8
	INCQ (R9)(R8*8)
	MOVQ 24(SP), R8
	INCQ (R9)(R8*8)
	ADDQ $4, AX
	JMP loop

done:
	VMOVUPD Y8, K_SUMD2(DX)
	VMOVUPD Y9, K_SUMA2(DX)
	VMOVUPD Y10, K_SUMB2(DX)
	VMOVUPD Y11, K_SUMAB(DX)
	VMOVUPD Y12, K_MAXABS(DX)
	VMOVDQU Y13, K_OVER(DX)
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

// func sumSqF32AVX2(x *float32, n int, out *[4]float64, cnt *[4]int64)
TEXT ·sumSqF32AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VPXOR Y12, Y12, Y12
	VPXOR Y13, Y13, Y13
	VXORPD Y15, Y15, Y15
	XORQ AX, AX

sqloop:
	CMPQ AX, CX
	JGE sqdone
	VCVTPS2PD (SI)(AX*4), Y0
	VCVTPS2PD 16(SI)(AX*4), Y1
	VSUBPD Y0, Y0, Y2
	VSUBPD Y1, Y1, Y3
	VCMPPD $0, Y15, Y2, Y2   // finite: x - x == 0
	VCMPPD $0, Y15, Y3, Y3
	VANDPD Y2, Y0, Y0
	VANDPD Y3, Y1, Y1
	VFMADD231PD Y0, Y0, Y8
	VFMADD231PD Y1, Y1, Y9
	VPSUBQ Y2, Y12, Y12
	VPSUBQ Y3, Y13, Y13
	ADDQ $8, AX
	JMP sqloop

sqdone:
	VADDPD Y9, Y8, Y8
	VPADDQ Y13, Y12, Y12
	MOVQ out+16(FP), DX
	VMOVUPD Y8, (DX)
	MOVQ cnt+24(FP), DX
	VMOVDQU Y12, (DX)
	VZEROUPPER
	RET
