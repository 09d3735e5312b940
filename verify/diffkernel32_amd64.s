//go:build amd64 && !purego

#include "textflag.h"

// The float32-block statistics kernel for bfloat16 against bfloat16
// (blockKernel in diffkernel32.go): sixteen float32 lanes, 32 pairs a
// step, the sums in float32 for at most blockSteps steps and then added
// into the float64 lanes of f32Kernel.

// f32Kernel offsets (TestKernelLayout)
#define K_SUMD2 0
#define K_SUMA2 64
#define K_SUMB2 128
#define K_SUMDS 192
#define K_MAXABS 256
#define K_RELTHR32 584
#define K_HIST32 524928

// blockSteps: steps (of 32 pairs) summed in float32 before the float64
// lanes take them (blockSteps in diffkernel32.go)
#define BLOCK_STEPS 8

// the absolute value of two bfloat16 words, of a float32
DATA abs16x2<>+0(SB)/4, $0x7fff7fff
GLOBL abs16x2<>(SB), RODATA|NOPTR, $4
DATA abs32<>+0(SB)/4, $0x7fffffff
GLOBL abs32<>(SB), RODATA|NOPTR, $4

// the high bfloat16 of a 32-bit word, as a float32
DATA hi16<>+0(SB)/4, $0xffff0000
GLOBL hi16<>(SB), RODATA|NOPTR, $4

// Ranges of the magnitudes' bits (bfloat16 words): blockLo 2^-55
// (0x2400), blockGap 15 binades (0x780), blockHi 2^60 (0x5d80); the
// smaller magnitude m of a pair passes when zero with the larger, or when
// m-blockLo < blockHi-blockGap-blockLo (0x3200) and the larger is within
// blockGap of it (diffkernel32.go says why).
DATA lo16x2<>+0(SB)/4, $0x24002400
GLOBL lo16x2<>(SB), RODATA|NOPTR, $4
DATA width16x2<>+0(SB)/4, $0x32003200
GLOBL width16x2<>(SB), RODATA|NOPTR, $4
DATA gap16x2<>+0(SB)/4, $0x07800780
GLOBL gap16x2<>(SB), RODATA|NOPTR, $4

// a histogram slot's index (d>>18: sign and exponent times 32) with the
// low five bits cleared for the copy
DATA slotmask32<>+0(SB)/4, $0xffffffe0
GLOBL slotmask32<>(SB), RODATA|NOPTR, $4

// each lane's copy of a slot: 0-15 for the even elements, 16-31 the odd
DATA lanes32<>+0(SB)/4, $0
DATA lanes32<>+4(SB)/4, $1
DATA lanes32<>+8(SB)/4, $2
DATA lanes32<>+12(SB)/4, $3
DATA lanes32<>+16(SB)/4, $4
DATA lanes32<>+20(SB)/4, $5
DATA lanes32<>+24(SB)/4, $6
DATA lanes32<>+28(SB)/4, $7
DATA lanes32<>+32(SB)/4, $8
DATA lanes32<>+36(SB)/4, $9
DATA lanes32<>+40(SB)/4, $10
DATA lanes32<>+44(SB)/4, $11
DATA lanes32<>+48(SB)/4, $12
DATA lanes32<>+52(SB)/4, $13
DATA lanes32<>+56(SB)/4, $14
DATA lanes32<>+60(SB)/4, $15
DATA lanes32<>+64(SB)/4, $16
DATA lanes32<>+68(SB)/4, $17
DATA lanes32<>+72(SB)/4, $18
DATA lanes32<>+76(SB)/4, $19
DATA lanes32<>+80(SB)/4, $20
DATA lanes32<>+84(SB)/4, $21
DATA lanes32<>+88(SB)/4, $22
DATA lanes32<>+92(SB)/4, $23
DATA lanes32<>+96(SB)/4, $24
DATA lanes32<>+100(SB)/4, $25
DATA lanes32<>+104(SB)/4, $26
DATA lanes32<>+108(SB)/4, $27
DATA lanes32<>+112(SB)/4, $28
DATA lanes32<>+116(SB)/4, $29
DATA lanes32<>+120(SB)/4, $30
DATA lanes32<>+124(SB)/4, $31
GLOBL lanes32<>(SB), RODATA|NOPTR, $128

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

// INC16(y, x): the sixteen slots in the words of y (x its low half).
#define INC16(y, x) \
	VMOVQ x, R8; \
	VPEXTRQ $1, x, R10; \
	VEXTRACTI128 $1, y, x; \
	VMOVQ x, R11; \
	VPEXTRQ $1, x, R12; \
	INC4W(R8, R13); \
	INC4W(R10, R13); \
	INC4W(R11, R13); \
	INC4W(R12, R13)

// FLUSH32(z, y, sum): the float32 sums of z (y its low half) added to the
// float64 lanes of sum, z cleared.
#define FLUSH32(z, y, sum) \
	VCVTPS2PD y, Z20; \
	VEXTRACTF32X8 $1, z, Y21; \
	VCVTPS2PD Y21, Z21; \
	VADDPD Z20, sum, sum; \
	VADDPD Z21, sum, sum; \
	VPXORD z, z, z

#define FLUSH_ALL \
	FLUSH32(Z8, Y8, Z12); \
	FLUSH32(Z9, Y9, Z13); \
	FLUSH32(Z10, Y10, Z14); \
	FLUSH32(Z11, Y11, Z15)

// STEP32: 32 pairs at element AX. The 32 words of each side, their
// magnitudes u and v; a step with a pair outside the range (blockLo,
// blockHi, blockGap) or with |d| > relThr32*|b| (rounded down: a new
// maximum relative error, maybe) is left (JNE done) before anything of it
// is added. The even elements are a word's low halves shifted up, the odd
// ones its high halves: a, b, d = a-b (exact), the sums d^2, a^2, b^2 and
// d*(a+b) (FMA, float32), max |d|, the histogram slot of d (sign and
// exponent) in the copy of its lane and half.
#define STEP32 \
	VMOVDQU32 (SI)(AX*2), Z0; \
	VMOVDQU32 (DI)(AX*2), Z1; \
	VPANDD Z31, Z0, Z2; \
	VPANDD Z31, Z1, Z3; \
	VPMAXUW Z3, Z2, Z4; \
	VPMINUW Z3, Z2, Z5; \
	VPSUBW Z5, Z4, Z4; \
	VPCMPUW $6, Z26, Z4, K1; \
	VPTESTMW Z5, Z5, K2; \
	VPSUBW Z29, Z5, Z5; \
	VPCMPUW $5, Z28, Z5, K2, K2; \
	VPSLLD $16, Z3, Z6; \
	VPANDD Z30, Z3, Z7; \
	VPSLLD $16, Z0, Z2; \
	VPANDD Z30, Z0, Z0; \
	VPSLLD $16, Z1, Z3; \
	VPANDD Z30, Z1, Z1; \
	VSUBPS Z3, Z2, Z4; \
	VSUBPS Z1, Z0, Z5; \
	VMULPS.RD_SAE Z27, Z6, Z6; \
	VMULPS.RD_SAE Z27, Z7, Z7; \
	VANDPS Z22, Z4, Z17; \
	VANDPS Z22, Z5, Z18; \
	VCMPPS $0x1e, Z6, Z17, K3; \
	VCMPPS $0x1e, Z7, Z18, K4; \
	KORD K1, K2, K1; \
	KORW K3, K4, K3; \
	KORTESTD K1, K3; \
	JNE done; \
	VMAXPS Z17, Z16, Z16; \
	VMAXPS Z18, Z16, Z16; \
	VFMADD231PS Z4, Z4, Z8; \
	VFMADD231PS Z5, Z5, Z8; \
	VFMADD231PS Z2, Z2, Z9; \
	VFMADD231PS Z0, Z0, Z9; \
	VFMADD231PS Z3, Z3, Z10; \
	VFMADD231PS Z1, Z1, Z10; \
	VADDPS Z3, Z2, Z2; \
	VADDPS Z1, Z0, Z0; \
	VFMADD231PS Z2, Z4, Z11; \
	VFMADD231PS Z0, Z5, Z11; \
	VPSRLD $18, Z4, Z4; \
	VPSRLD $18, Z5, Z5; \
	VPTERNLOGD $0xea, Z25, Z23, Z4; \
	VPTERNLOGD $0xea, Z24, Z23, Z5; \
	VPMOVDW Z4, Y4; \
	VPMOVDW Z5, Y5; \
	INC16(Y4, X4); \
	INC16(Y5, X5)

// func statsBF16BF16Block(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16BF16Block(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ k+24(FP), DX
	MOVQ $K_HIST32, R9
	ADDQ DX, R9
	VMOVUPD K_SUMD2(DX), Z12
	VMOVUPD K_SUMA2(DX), Z13
	VMOVUPD K_SUMB2(DX), Z14
	VMOVUPD K_SUMDS(DX), Z15
	VMOVUPD K_MAXABS(DX), Z19
	VBROADCASTSS K_RELTHR32(DX), Z27
	VPBROADCASTD abs16x2<>(SB), Z31
	VPBROADCASTD hi16<>(SB), Z30
	VPBROADCASTD lo16x2<>(SB), Z29
	VPBROADCASTD width16x2<>(SB), Z28
	VPBROADCASTD gap16x2<>(SB), Z26
	VMOVDQU32 lanes32<>(SB), Z25
	VMOVDQU32 lanes32<>+64(SB), Z24
	VPBROADCASTD slotmask32<>(SB), Z23
	VPBROADCASTD abs32<>(SB), Z22
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z16, Z16, Z16
	XORQ AX, AX

block:
	MOVQ $BLOCK_STEPS, BX

step:
	CMPQ AX, CX
	JGE  done
	STEP32
	ADDQ $32, AX
	DECQ BX
	JNZ  step
	FLUSH_ALL
	JMP  block

done:
	FLUSH_ALL
	VCVTPS2PD Y16, Z20
	VEXTRACTF32X8 $1, Z16, Y21
	VCVTPS2PD Y21, Z21
	VMAXPD Z20, Z19, Z19
	VMAXPD Z21, Z19, Z19
	VMOVUPD Z12, K_SUMD2(DX)
	VMOVUPD Z13, K_SUMA2(DX)
	VMOVUPD Z14, K_SUMB2(DX)
	VMOVUPD Z15, K_SUMDS(DX)
	VMOVUPD Z19, K_MAXABS(DX)
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET
