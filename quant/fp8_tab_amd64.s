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

// the bytes 0, 2, ..., 126 of two registers (VPERMI2B), and 1, 3, ..., 127
DATA evenbytes<>+0(SB)/8, $0x0e0c0a0806040200
DATA evenbytes<>+8(SB)/8, $0x1e1c1a1816141210
DATA evenbytes<>+16(SB)/8, $0x2e2c2a2826242220
DATA evenbytes<>+24(SB)/8, $0x3e3c3a3836343230
DATA evenbytes<>+32(SB)/8, $0x4e4c4a4846444240
DATA evenbytes<>+40(SB)/8, $0x5e5c5a5856545250
DATA evenbytes<>+48(SB)/8, $0x6e6c6a6866646260
DATA evenbytes<>+56(SB)/8, $0x7e7c7a7876747270
GLOBL evenbytes<>(SB), RODATA|NOPTR, $64

// func fp8TabSplit(tab, prod *[512]byte)
TEXT ·fp8TabSplit(SB), NOSPLIT, $0-16
	MOVQ tab+0(FP), DI
	MOVQ prod+8(FP), SI
	VMOVDQU64 evenbytes<>(SB), Z4
	VPBROADCASTB one8<>(SB), Z5
	VPADDB Z5, Z4, Z5
	MOVQ $4, CX

split:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQA64 Z4, Z2
	VPERMI2B Z1, Z0, Z2
	VMOVDQA64 Z5, Z3
	VPERMI2B Z1, Z0, Z3
	VMOVDQU64 Z2, (DI)
	VMOVDQU64 Z3, 256(DI)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  split
	VZEROUPPER
	RET

DATA one8<>+0(SB)/1, $1
GLOBL one8<>(SB), RODATA|NOPTR, $1
