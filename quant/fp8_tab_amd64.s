//go:build amd64 && !purego

#include "textflag.h"

// fp8TabBF16AVX512 (fp8_tab.go): 64 float8 codes a step turned into
// their bfloat16 products by their block's table, 512 bytes a block at
// tabs (the low bytes of the 256 codes' products, then the high bytes),
// looked up with VPERMI2B (128 entries a lookup: codes 0-127 and 128-255
// blended by the code's top bit). Registers: Z20 the codes' order that
// the byte interleaves restore, Z21-Z24 the block's low bytes, Z25-Z28
// its high bytes.

// func fp8TabBF16AVX512(dst, src *byte, n int, tabs *byte, bw, off int, perm *[64]byte)
TEXT ·fp8TabBF16AVX512(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ tabs+24(FP), R11
	MOVQ bw+32(FP), R12
	MOVQ off+40(FP), R13
	MOVQ perm+48(FP), R8
	VMOVDQU64 (R8), Z20

block:
	TESTQ CX, CX
	JZ    done
	VMOVDQU64 0(R11), Z21
	VMOVDQU64 64(R11), Z22
	VMOVDQU64 128(R11), Z23
	VMOVDQU64 192(R11), Z24
	VMOVDQU64 256(R11), Z25
	VMOVDQU64 320(R11), Z26
	VMOVDQU64 384(R11), Z27
	VMOVDQU64 448(R11), Z28
	ADDQ $512, R11
	MOVQ R12, R10
	SUBQ R13, R10
	XORQ R13, R13
	CMPQ R10, CX
	CMOVQGT CX, R10
	SUBQ R10, CX
	SHRQ $6, R10

step:
	VMOVDQU64 (SI), Z0
	VPERMB Z0, Z20, Z0
	VPMOVB2M Z0, K1
	VMOVDQA64 Z0, Z1
	VPERMI2B Z22, Z21, Z1
	VMOVDQA64 Z0, Z2
	VPERMI2B Z24, Z23, Z2
	VPBLENDMB Z2, Z1, K1, Z1
	VMOVDQA64 Z0, Z3
	VPERMI2B Z26, Z25, Z3
	VPERMI2B Z28, Z27, Z0
	VPBLENDMB Z0, Z3, K1, Z3
	VPUNPCKLBW Z3, Z1, Z4
	VPUNPCKHBW Z3, Z1, Z5
	VMOVDQU64 Z4, (DI)
	VMOVDQU64 Z5, 64(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ R10
	JNZ  step
	JMP  block

done:
	VZEROUPPER
	RET
