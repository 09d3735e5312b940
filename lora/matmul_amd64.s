//go:build amd64 && !purego

#include "textflag.h"

// The float32 operations of addRowGo, eight lanes at a time: a fused
// multiply-add per term (fma32), then the rounded multiply and add into c,
// in the same order.

#define MULADD(OFF, ACC) \
	VFMADD231PS OFF(R11), Y8, ACC

#define STORE(OFF, ACC) \
	VMULPS ACC, Y15, ACC \
	VADDPS OFF(DI), ACC, ACC \
	VMOVUPS ACC, OFF(DI)

// func addRowAVX2(c, l, rm *float32, n, r, cols int, s float32)
TEXT ·addRowAVX2(SB), NOSPLIT, $0-52
	MOVQ c+0(FP), DI
	MOVQ l+8(FP), SI
	MOVQ rm+16(FP), DX
	MOVQ n+24(FP), R8
	SHLQ $2, R8
	MOVQ r+32(FP), R9
	MOVQ cols+40(FP), R10
	VBROADCASTSS s+48(FP), Y15
	TESTQ R9, R9
	JLE done
colloop:
	CMPQ R10, $64
	JLT done
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ DX, R11
	MOVQ SI, R12
	MOVQ R9, R13
kloop:
	VBROADCASTSS (R12), Y8
	MULADD(0, Y0)
	MULADD(32, Y1)
	MULADD(64, Y2)
	MULADD(96, Y3)
	MULADD(128, Y4)
	MULADD(160, Y5)
	MULADD(192, Y6)
	MULADD(224, Y7)
	ADDQ $4, R12
	ADDQ R8, R11
	DECQ R13
	JNZ kloop
	STORE(0, Y0)
	STORE(32, Y1)
	STORE(64, Y2)
	STORE(96, Y3)
	STORE(128, Y4)
	STORE(160, Y5)
	STORE(192, Y6)
	STORE(224, Y7)
	ADDQ $256, DI
	ADDQ $256, DX
	SUBQ $64, R10
	JMP colloop
done:
	VZEROUPPER
	RET

// addRowAVX512 is addRowAVX2 128 columns (eight registers of 16 lanes) at
// a time: the same terms in the same order, the same roundings.

#define MULADD512(OFF, ACC) \
	VFMADD231PS OFF(R11), Z16, ACC

#define STORE512(OFF, ACC) \
	VMULPS ACC, Z31, ACC \
	VADDPS OFF(DI), ACC, ACC \
	VMOVUPS ACC, OFF(DI)

// func addRowAVX512(c, l, rm *float32, n, r, cols int, s float32)
TEXT ·addRowAVX512(SB), NOSPLIT, $0-52
	MOVQ c+0(FP), DI
	MOVQ l+8(FP), SI
	MOVQ rm+16(FP), DX
	MOVQ n+24(FP), R8
	SHLQ $2, R8
	MOVQ r+32(FP), R9
	MOVQ cols+40(FP), R10
	VBROADCASTSS s+48(FP), Z31
	TESTQ R9, R9
	JLE done512
colloop512:
	CMPQ R10, $128
	JLT done512
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ DX, R11
	MOVQ SI, R12
	MOVQ R9, R13
kloop512:
	VBROADCASTSS (R12), Z16
	MULADD512(0, Z0)
	MULADD512(64, Z1)
	MULADD512(128, Z2)
	MULADD512(192, Z3)
	MULADD512(256, Z4)
	MULADD512(320, Z5)
	MULADD512(384, Z6)
	MULADD512(448, Z7)
	ADDQ $4, R12
	ADDQ R8, R11
	DECQ R13
	JNZ kloop512
	STORE512(0, Z0)
	STORE512(64, Z1)
	STORE512(128, Z2)
	STORE512(192, Z3)
	STORE512(256, Z4)
	STORE512(320, Z5)
	STORE512(384, Z6)
	STORE512(448, Z7)
	ADDQ $512, DI
	ADDQ $512, DX
	SUBQ $128, R10
	JMP colloop512
done512:
	VZEROUPPER
	RET
