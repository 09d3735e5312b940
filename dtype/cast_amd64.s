//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels of cast.go, 16 elements a round; n is a multiple of 16.
// They do what the Go loops do, in integer lanes where those do.

// func f32ToBF16AVX2(dst, src *byte, n int)
// (u + 0x7fff + (u>>16)&1) >> 16, and 0x7fc0 for a NaN; the two vectors
// of 32-bit results are packed to 16 bits (no value exceeds 0xffff).
TEXT ·f32ToBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $1, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15 // 1
	MOVL $0x7fff, AX
	MOVD AX, X14
	VPBROADCASTD X14, Y14 // 0x7fff
	MOVL $0x7fc0, AX
	MOVD AX, X13
	VPBROADCASTD X13, Y13 // the NaN
	SHRQ $4, CX
	JZ bf16done
bf16loop:
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VPSRLD $16, Y0, Y2
	VPSRLD $16, Y1, Y3
	VPAND Y15, Y2, Y2
	VPAND Y15, Y3, Y3
	VPADDD Y14, Y0, Y4
	VPADDD Y14, Y1, Y5
	VPADDD Y2, Y4, Y4
	VPADDD Y3, Y5, Y5
	VPSRLD $16, Y4, Y4
	VPSRLD $16, Y5, Y5
	VCMPPS $3, Y0, Y0, Y6 // unordered: NaN
	VCMPPS $3, Y1, Y1, Y7
	VPBLENDVB Y6, Y13, Y4, Y4
	VPBLENDVB Y7, Y13, Y5, Y5
	VPACKUSDW Y5, Y4, Y4
	VPERMQ $0xd8, Y4, Y4
	VMOVDQU Y4, 0(DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ bf16loop
bf16done:
	VZEROUPPER
	RET

// func f32ToBF16AVX512(dst, src *byte, n int)
// The same integer rounding as f32ToBF16AVX2, 32 elements a round (and
// a last 16): (u + 0x7fff + (u>>16)&1) >> 16, and 0x7fc0 for a NaN (a
// masked move of 0x7fc00000 into the NaN lanes before the shift). The
// high halves of the two vectors of 32-bit results are gathered into one
// by a single VPERMT2W (words 1, 3, ... 63 of the pair). No
// VCVTNE2PS2BF16: it treats subnormal inputs as zero, where torch rounds
// them like any other value.
TEXT ·f32ToBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $1, AX
	VPBROADCASTD AX, Z31 // 1
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z30 // 0x7fff
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z29 // the NaN, before the shift
	VMOVDQU16 bf16HighWords<>(SB), Z28
	MOVQ CX, DX
	SHRQ $5, CX
	JZ bf16x16
bf16x32:
	VMOVDQU32 0(SI), Z0
	VMOVDQU32 64(SI), Z1
	VPSRLD $16, Z0, Z2
	VPSRLD $16, Z1, Z3
	VPANDD Z31, Z2, Z2
	VPANDD Z31, Z3, Z3
	VPADDD Z30, Z0, Z4
	VPADDD Z30, Z1, Z5
	VPADDD Z2, Z4, Z4
	VPADDD Z3, Z5, Z5
	VCMPPS $3, Z0, Z0, K1 // unordered: NaN
	VCMPPS $3, Z1, Z1, K2
	VMOVDQA32 Z29, K1, Z4
	VMOVDQA32 Z29, K2, Z5
	VPERMT2W Z5, Z28, Z4
	VMOVDQU16 Z4, 0(DI)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf16x32
bf16x16:
	TESTQ $16, DX
	JZ bf16x512done
	VMOVDQU32 0(SI), Z0
	VPSRLD $16, Z0, Z2
	VPANDD Z31, Z2, Z2
	VPADDD Z30, Z0, Z4
	VPADDD Z2, Z4, Z4
	VCMPPS $3, Z0, Z0, K1
	VMOVDQA32 Z29, K1, Z4
	VPSRLD $16, Z4, Z4
	VPMOVDW Z4, 0(DI)
bf16x512done:
	VZEROUPPER
	RET

// Word indices 1, 3, ... 63: the high halves of two vectors of 16 dwords.
DATA bf16HighWords<>+0(SB)/8, $0x0007000500030001
DATA bf16HighWords<>+8(SB)/8, $0x000f000d000b0009
DATA bf16HighWords<>+16(SB)/8, $0x0017001500130011
DATA bf16HighWords<>+24(SB)/8, $0x001f001d001b0019
DATA bf16HighWords<>+32(SB)/8, $0x0027002500230021
DATA bf16HighWords<>+40(SB)/8, $0x002f002d002b0029
DATA bf16HighWords<>+48(SB)/8, $0x0037003500330031
DATA bf16HighWords<>+56(SB)/8, $0x003f003d003b0039
GLOBL bf16HighWords<>(SB), RODATA|NOPTR, $64

// func f32ToF16AVX2(dst, src *byte, n int)
// VCVTPS2PH rounding to nearest even; a NaN is first made the quiet NaN
// with no payload and its sign, which converts to 0x7e00 with that sign.
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x80000000, AX
	MOVD AX, X15
	VPBROADCASTD X15, Y15 // sign
	MOVL $0x7fc00000, AX
	MOVD AX, X14
	VPBROADCASTD X14, Y14 // quiet NaN
	SHRQ $4, CX
	JZ f16done
f16loop:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VCMPPS $3, Y0, Y0, Y2
	VCMPPS $3, Y1, Y1, Y3
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VORPS Y14, Y4, Y4
	VORPS Y14, Y5, Y5
	VBLENDVPS Y2, Y4, Y0, Y0
	VBLENDVPS Y3, Y5, Y1, Y1
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VMOVDQU X0, 0(DI)
	VMOVDQU X1, 16(DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ f16loop
f16done:
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst, src *byte, n int)
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ bf32done
bf32loop:
	VPMOVZXWD 0(SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf32loop
bf32done:
	VZEROUPPER
	RET

// func cpuidECX1() uint32
TEXT ·cpuidECX1(SB), NOSPLIT, $0-4
	MOVL $1, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
