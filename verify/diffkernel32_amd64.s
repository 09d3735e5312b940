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
#define K_BASE 656000
#define K_PLANES 656064
#define K_PEND 656320
#define K_MPLANES 656512
#define K_SCRATCH 657600


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

// 1 in a 32-bit word: min(d's bits, 1) is 1 for d nonzero (and for -0,
// which the one-by-one count then counts as a zero)
DATA one32<>+0(SB)/4, $1
GLOBL one32<>(SB), RODATA|NOPTR, $4

// 1 in both 16-bit words (ONEHOT)
DATA one16x2<>+0(SB)/4, $0x00010001
GLOBL one16x2<>(SB), RODATA|NOPTR, $4

// VPSHUFB: a 32-bit word's low 16-bit word copied to its high one
DATA dupctl<>+0(SB)/8, $0x0504050401000100
DATA dupctl<>+8(SB)/8, $0x0d0c0d0c09080908
DATA dupctl<>+16(SB)/8, $0x0504050401000100
DATA dupctl<>+24(SB)/8, $0x0d0c0d0c09080908
DATA dupctl<>+32(SB)/8, $0x0504050401000100
DATA dupctl<>+40(SB)/8, $0x0d0c0d0c09080908
DATA dupctl<>+48(SB)/8, $0x0504050401000100
DATA dupctl<>+56(SB)/8, $0x0d0c0d0c09080908
GLOBL dupctl<>(SB), RODATA|NOPTR, $64

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

// FLUSH32(z, y, off): the float32 sums of z (y its low half) added to
// the float64 lanes at off(DX), z cleared.
#define FLUSH32(z, y, off) \
	VCVTPS2PD y, Z1; \
	VEXTRACTF32X8 $1, z, Y2; \
	VCVTPS2PD Y2, Z2; \
	VADDPD off(DX), Z1, Z1; \
	VADDPD Z2, Z1, Z1; \
	VMOVUPD Z1, off(DX); \
	VPXORD z, z, z

#define FLUSH_ALL \
	FLUSH32(Z8, Y8, K_SUMD2); \
	FLUSH32(Z9, Y9, K_SUMA2); \
	FLUSH32(Z10, Y10, K_SUMB2); \
	FLUSH32(Z11, Y11, K_SUMDS)

// CSA(p, x, y): a carry-save adder of bit-sliced counters: p = p^x^y
// (the sum's bit), x = the carry, majority(p, x, y), from p's new bit
// (x and y equal: x; else not p).
#define CSA(p, x, y) \
	VPTERNLOGD $0x96, y, x, p; \
	VPTERNLOGD $0xd4, p, y, x

// ONEHOT(d, w): the histogram bit of each difference of d (float32) in
// w: bit e-base of the low 16-bit word for d > 0, of the high word for
// d < 0 (e its biased exponent, base K_BASE); none for d zero or outside
// the window [base, base+16). t = d>>23 (sign*256 + e) is copied to both
// words, less base in the low word and base+256 in the high one (Z24):
// each word's count is below 16 only for its sign within the window, and
// VPSLLVW shifts its 1 (Z25) out for counts of 16 and more.
#define ONEHOT(d, w) \
	VPSRLD $23, d, w; \
	VPSHUFB dupctl<>(SB), w, w; \
	VPSUBW Z24, w, w; \
	VPSLLVW w, Z25, w

// SLOW(d, off, lanes): the lanes of K5 (d != 0 outside the window)
// stored as histogram slots of d (the copy of lanes) at K_SCRATCH+off.
#define SLOTS(d, off, lanes) \
	VPSRLD $18, d, Z1; \
	VPANDD.BCST slotmask32<>(SB), Z1, Z1; \
	VPORD lanes, Z1, Z1; \
	VMOVDQU32 Z1, K_SCRATCH+off(DX)

// STEP32(ok, loop): 32 pairs at element AX (a step of the tree: TREE). The 32 words of each side, their magnitudes u and v; a step with a
// pair outside the range (blockLo, blockHi, blockGap) or with |d| >
// relThr32*|b| (rounded down: a new maximum relative error, maybe) is
// left (JNE done) before anything of it is added. The even elements are a
// word's low halves shifted up, the odd ones its high halves: a, b, d =
// a-b (exact), the sums d^2, a^2, b^2 and d*(a+b) (FMA, float32), max |d|,
// and the histogram: each difference's one-hot bit (ONEHOT), those outside
// the window counted one by one in hist32 (ok, loop: labels), the rest
// added to the bit-sliced counters (P1 Z12, P2 Z13, P4 Z14, P8 Z15, the
// carries of weight 2, 4 and 8 waiting in Z19, Z20, Z21).
#define STEP32(ok, loop) \
	RANGE32; \
	VPSLLD $16, Z3, Z6; \
	VPANDD.BCST hi16<>(SB), Z3, Z7; \
	UNPACK32; \
	VMULPS.RD_SAE Z27, Z6, Z6; \
	VMULPS.RD_SAE Z27, Z7, Z7; \
	VANDPS.BCST abs32<>(SB), Z4, Z17; \
	VANDPS.BCST abs32<>(SB), Z5, Z18; \
	VCMPPS $0x1e, Z6, Z17, K3; \
	VCMPPS $0x1e, Z7, Z18, K4; \
	KORD K1, K2, K1; \
	KORW K3, K4, K3; \
	KORTESTD K1, K3; \
	JNE done; \
	VMAXPS Z17, Z16, Z16; \
	VMAXPS Z18, Z16, Z16; \
	SUMS32(ok, loop)

// STEP32INF(ok, loop): STEP32 without the relative-error test, for a
// maximum relative error of +Inf (statsBF16BF16BlockInf): only the range
// leaves a step, and max |d| is one VRANGEPS a half (the larger
// magnitude, its sign cleared: VMAXPS of |d|'s bits).
#define STEP32INF(ok, loop) \
	RANGE32; \
	KORTESTD K1, K2; \
	JNE done; \
	UNPACK32; \
	VRANGEPS $0x0b, Z4, Z16, Z16; \
	VRANGEPS $0x0b, Z5, Z16, Z16; \
	SUMS32(ok, loop)

// RANGE32: the step's words (Z0 A, Z1 B), their magnitudes (Z3 B's), and
// the pairs outside the range in K1 (the larger magnitude too far above
// the smaller) and K2 (the larger nonzero and the smaller outside
// [blockLo, blockHi-blockGap): a zero against a nonzero is left, however
// small the nonzero, whose square would underflow below 2^-112).
#define RANGE32 \
	CMPQ AX, CX; \
	JGE  done; \
	VMOVDQU32 (SI)(AX*2), Z0; \
	VMOVDQU32 (DI)(AX*2), Z1; \
	VPANDD.BCST abs16x2<>(SB), Z0, Z2; \
	VPANDD.BCST abs16x2<>(SB), Z1, Z3; \
	VPMAXUW Z3, Z2, Z4; \
	VPMINUW Z3, Z2, Z5; \
	VPTESTMW Z4, Z4, K2; \
	VPSUBW Z5, Z4, Z4; \
	VPCMPUW $6, Z26, Z4, K1; \
	VPSUBW Z29, Z5, Z5; \
	VPCMPUW $5, Z28, Z5, K2, K2

// UNPACK32: a (Z2 even, Z0 odd), b (Z3, Z1) as float32, d = a-b (Z4,
// Z5).
#define UNPACK32 \
	VPSLLD $16, Z0, Z2; \
	VPANDD.BCST hi16<>(SB), Z0, Z0; \
	VPSLLD $16, Z1, Z3; \
	VPANDD.BCST hi16<>(SB), Z1, Z1; \
	VSUBPS Z3, Z2, Z4; \
	VSUBPS Z1, Z0, Z5

// SUMS32(ok, loop): a step taken: its sums and its histogram bits. A
// difference outside the window is one whose one-hot word is below
// min(d's bits, 1) (unsigned: zero against a nonzero d), a compare a half
// (K5, K6).
#define SUMS32(ok, loop) \
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
	ONEHOT(Z4, Z6); \
	ONEHOT(Z5, Z0); \
	VPMINUD.BCST one32<>(SB), Z4, Z2; \
	VPMINUD.BCST one32<>(SB), Z5, Z3; \
	VPCMPUD $1, Z2, Z6, K5; \
	VPCMPUD $1, Z3, Z0, K6; \
	KORTESTW K5, K6; \
	JEQ ok; \
	SLOTS(Z4, 0, lanes32<>(SB)); \
	SLOTS(Z5, 64, lanes32<>+64(SB)); \
	KMOVW K5, R8; \
	KMOVW K6, R10; \
	SHLQ $16, R10; \
	ORQ R10, R8; \
loop: \
	BSFQ R8, R10; \
	MOVLQZX K_SCRATCH(DX)(R10*4), R11; \
	INCQ (R9)(R11*8); \
	LEAQ -1(R8), R10; \
	ANDQ R10, R8; \
	JNE loop; \
ok: \
	CSA(Z12, Z6, Z0)

// TREE_at: the step's carry of weight 2 (Z6) into the tree: waits in Z19
// after an even step; after an odd one goes with Z19's into P2, whose
// carry of weight 4 waits in Z20 (steps 1, 5) or goes with Z20's into P4
// (3, 7), whose carry of weight 8 waits in Z21 (3) or goes with Z21's
// into P8 (7), whose carry of weight 16 goes to the planes of weight 16
// and up (TREE_7REL, TREE_7INF: registers, then memory). The carries
// waiting after step s are those of the bits of s+1 (exit: PEND).
#define TREE_0 VMOVDQA32 Z6, Z19
#define TREE_2 VMOVDQA32 Z6, Z19
#define TREE_4 VMOVDQA32 Z6, Z19
#define TREE_6 VMOVDQA32 Z6, Z19
#define TREE_1 CSA(Z13, Z19, Z6); VMOVDQA32 Z19, Z20
#define TREE_5 CSA(Z13, Z19, Z6); VMOVDQA32 Z19, Z20
#define TREE_3 CSA(Z13, Z19, Z6); CSA(Z14, Z20, Z19); VMOVDQA32 Z20, Z21

// RIPPLE1(off): the carry Z21 added to the memory plane at off, Z21 the
// carry out.
#define RIPPLE1(off) \
	VMOVDQU32 K_MPLANES+off(DX), Z0; \
	VPXORD Z21, Z0, Z1; \
	VMOVDQU32 Z1, K_MPLANES+off(DX); \
	VPANDD Z0, Z21, Z21

// PROLOGUE: the arguments, the constants and the planes into registers.
#define PROLOGUE \
	MOVQ x+0(FP), SI \
	MOVQ y+8(FP), DI \
	MOVQ n+16(FP), CX \
	MOVQ k+24(FP), DX \
	MOVQ $K_HIST32, R9 \
	ADDQ DX, R9 \
	VMOVDQU32 K_PLANES(DX), Z12 \
	VMOVDQU32 K_PLANES+64(DX), Z13 \
	VMOVDQU32 K_PLANES+128(DX), Z14 \
	VMOVDQU32 K_PLANES+192(DX), Z15 \
	VBROADCASTSS K_RELTHR32(DX), Z27 \
	VPBROADCASTD lo16x2<>(SB), Z29 \
	VPBROADCASTD width16x2<>(SB), Z28 \
	VPBROADCASTD gap16x2<>(SB), Z26 \
	VPBROADCASTD one16x2<>(SB), Z25 \
	MOVL K_BASE(DX), R8 \
	LEAL 256(R8), R10 \
	SHLL $16, R10 \
	ORL  R10, R8 \
	VPBROADCASTD R8, Z24 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z16, Z16, Z16 \
	XORQ AX, AX

// EPILOGUE: the sums flushed, max |d|, the planes and the waiting carries
// (PEND: the bits of the steps done in the tree) stored; AX returned.
#define EPILOGUE \
	FLUSH_ALL \
	VCVTPS2PD Y16, Z1 \
	VEXTRACTF32X8 $1, Z16, Y2 \
	VCVTPS2PD Y2, Z2 \
	VMAXPD K_MAXABS(DX), Z1, Z1 \
	VMAXPD Z2, Z1, Z1 \
	VMOVUPD Z1, K_MAXABS(DX) \
	VMOVDQU32 Z12, K_PLANES(DX) \
	VMOVDQU32 Z13, K_PLANES+64(DX) \
	VMOVDQU32 Z14, K_PLANES+128(DX) \
	VMOVDQU32 Z15, K_PLANES+192(DX) \
	MOVQ AX, BX \
	SHRQ $5, BX \
	TESTQ $1, BX \
	JEQ  pend2 \
	VMOVDQU32 Z19, K_PEND(DX) \
pend2: \
	TESTQ $2, BX \
	JEQ  pend4 \
	VMOVDQU32 Z20, K_PEND+64(DX) \
pend4: \
	TESTQ $4, BX \
	JEQ  pended \
	VMOVDQU32 Z21, K_PEND+128(DX) \
pended: \
	MOVQ AX, ret+32(FP) \
	VZEROUPPER \
	RET

// TREE_7REL: the eighth step's tree of statsBF16BF16Block: as TREE_7INF with the four
// registers it has free (Z22, Z23, Z30, Z31: planes of weight 16 to 128),
// added into the memory planes every 15 ripples (FLUSHREL).
#define TREE_7REL \
	CSA(Z13, Z19, Z6); CSA(Z14, Z20, Z19); CSA(Z15, Z21, Z20); \
	HA(Z22, Z21, Z0); HA(Z23, Z0, Z1); HA(Z30, Z1, Z0); VPXORD Z0, Z31, Z31; \
	DECQ R12; \
	JNE rippled; \
	FLUSHREL; \
rippled:

// FLUSHREL: FLUSHREG of TREE_7REL's four planes; R12 set to 15 ripples.
#define FLUSHREL \
	VPXORD Z2, Z2, Z2; \
	FA(Z22, 0); FA(Z23, 64); FA(Z30, 128); FA(Z31, 192); \
	VMOVDQA32 Z2, Z21; \
	RIPPLE1(256); RIPPLE1(320); RIPPLE1(384); RIPPLE1(448); \
	RIPPLE1(512); RIPPLE1(576); \
	RIPPLE1(640); RIPPLE1(704); RIPPLE1(768); RIPPLE1(832); RIPPLE1(896); \
	RIPPLE1(960); RIPPLE1(1024); \
	MOVQ $15, R12

// HA(p, c, t): a half adder of bit-sliced counters: p = p^c, the carry
// p&c in t.
#define HA(p, c, t) \
	VPANDD p, c, t; \
	VPXORD c, p, p

// TREE_7INF: the eighth step's tree of statsBF16BF16BlockInf: the carry of weight 16
// into planes of weight 16 to 2^11 in registers (Z7, Z17, Z18, Z22, Z23,
// Z27, Z30, Z31: the registers the relative-error test and the constants
// of STEP32 take), without a test a ripple: each ripple adds at most 1 to
// a bit's count there (in units of 16), so they are added into the
// memory planes (FLUSHREG) every 255 ripples (R12 counts down) and at the
// end of a call, before they can overflow.
#define TREE_7INF \
	CSA(Z13, Z19, Z6); CSA(Z14, Z20, Z19); CSA(Z15, Z21, Z20); \
	HA(Z7, Z21, Z0); HA(Z17, Z0, Z1); HA(Z18, Z1, Z0); HA(Z22, Z0, Z1); \
	HA(Z23, Z1, Z0); HA(Z27, Z0, Z1); HA(Z30, Z1, Z0); VPXORD Z0, Z31, Z31; \
	DECQ R12; \
	JNE rippled; \
	FLUSHREG; \
rippled:

// FA(p, off): plane p added into the memory plane at off with the carry
// in Z2 (a full adder), p cleared.
#define FA(p, off) \
	VMOVDQU32 K_MPLANES+off(DX), Z0; \
	VMOVDQA32 Z0, Z1; \
	VPTERNLOGD $0x96, Z2, p, Z1; \
	VMOVDQU32 Z1, K_MPLANES+off(DX); \
	VPTERNLOGD $0xe8, Z0, p, Z2; \
	VPXORD p, p, p

// FLUSHREG: the register planes (weights 16 to 2^11) added into the
// memory planes (16 to 2^20) and cleared; R12 set to 255 ripples again.
// The memory planes' count never passes 2^21-1 (blockMaxSteps), so no
// carry leaves the last.
#define FLUSHREG \
	VPXORD Z2, Z2, Z2; \
	FA(Z7, 0); FA(Z17, 64); FA(Z18, 128); FA(Z22, 192); \
	FA(Z23, 256); FA(Z27, 320); FA(Z30, 384); FA(Z31, 448); \
	VMOVDQA32 Z2, Z21; \
	RIPPLE1(512); RIPPLE1(576); \
	RIPPLE1(640); RIPPLE1(704); RIPPLE1(768); RIPPLE1(832); RIPPLE1(896); \
	RIPPLE1(960); RIPPLE1(1024); \
	MOVQ $255, R12

// func statsBF16BF16Block(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16BF16Block(SB), NOSPLIT, $0-40
	PROLOGUE
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	MOVQ $15, R12
block:
	STEP32(ok0, loop0)
	TREE_0
	ADDQ $32, AX
	STEP32(ok1, loop1)
	TREE_1
	ADDQ $32, AX
	STEP32(ok2, loop2)
	TREE_2
	ADDQ $32, AX
	STEP32(ok3, loop3)
	TREE_3
	ADDQ $32, AX
	STEP32(ok4, loop4)
	TREE_4
	ADDQ $32, AX
	STEP32(ok5, loop5)
	TREE_5
	ADDQ $32, AX
	STEP32(ok6, loop6)
	TREE_6
	ADDQ $32, AX
	STEP32(ok7, loop7)
	TREE_7REL
	ADDQ $32, AX
	FLUSH_ALL
	JMP  block

done:
	VMOVDQA32 Z21, Z3
	FLUSHREL
	VMOVDQA32 Z3, Z21
	EPILOGUE

// func statsBF16BF16BlockInf(x, y unsafe.Pointer, n int, k *f32Kernel) int
TEXT ·statsBF16BF16BlockInf(SB), NOSPLIT, $0-40
	PROLOGUE
	VPXORD Z7, Z7, Z7
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z27, Z27, Z27
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	MOVQ $255, R12

block:
	STEP32INF(ok0, loop0)
	TREE_0
	ADDQ $32, AX
	STEP32INF(ok1, loop1)
	TREE_1
	ADDQ $32, AX
	STEP32INF(ok2, loop2)
	TREE_2
	ADDQ $32, AX
	STEP32INF(ok3, loop3)
	TREE_3
	ADDQ $32, AX
	STEP32INF(ok4, loop4)
	TREE_4
	ADDQ $32, AX
	STEP32INF(ok5, loop5)
	TREE_5
	ADDQ $32, AX
	STEP32INF(ok6, loop6)
	TREE_6
	ADDQ $32, AX
	STEP32INF(ok7, loop7)
	TREE_7INF
	ADDQ $32, AX
	FLUSH_ALL
	JMP  block

done:
	VMOVDQA32 Z21, Z3
	FLUSHREG
	VMOVDQA32 Z3, Z21
	EPILOGUE
