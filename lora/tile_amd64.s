//go:build amd64 && !purego

#include "textflag.h"

// func decodeBF16AVX2(dst *float32, src *uint16, n int)
// n a multiple of 16: each bfloat16 widened to the top half of a float32.
TEXT ·decodeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   ddone
dloop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       dloop
ddone:
	VZEROUPPER
	RET

// ROUND leaves in OUT the bfloat16 of the eight float32s in IN, in the
// low half of each lane: (u + 0x7fff + (u>>16 & 1)) >> 16, 0x7fc0 for NaN.
// Y5 = 1, Y6 = 0x7fff, Y7 = 0x7fc0 in every lane; Y8 and Y9 scratch.
#define ROUND(IN, OUT) \
	VPSRLD    $16, IN, Y8 \
	VPAND     Y5, Y8, Y8 \
	VPADDD    Y6, Y8, Y8 \
	VPADDD    IN, Y8, Y8 \
	VPSRLD    $16, Y8, Y8 \
	VCMPPS    $3, IN, IN, Y9 \
	VPBLENDVB Y9, Y7, Y8, OUT

// func encodeBF16AVX2(dst *uint16, src *float32, n int)
// n a multiple of 16: dtype.F32ToBF16 of each float32.
TEXT ·encodeBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   edone
	MOVL $1, AX
	MOVD AX, X5
	VPBROADCASTD X5, Y5
	MOVL $0x7fff, AX
	MOVD AX, X6
	VPBROADCASTD X6, Y6
	MOVL $0x7fc0, AX
	MOVD AX, X7
	VPBROADCASTD X7, Y7
eloop:
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	ROUND(Y0, Y2)
	ROUND(Y1, Y3)
	VPACKUSDW Y3, Y2, Y4
	VPERMQ    $0xD8, Y4, Y4
	VMOVDQU   Y4, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       eloop
edone:
	VZEROUPPER
	RET
