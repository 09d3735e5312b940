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
