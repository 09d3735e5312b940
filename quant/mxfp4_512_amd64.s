//go:build amd64 && !purego

#include "textflag.h"

// mxfp4T32AVX512: gpt-oss MXFP4 to bfloat16 or float16 in the
// transformers layout (mxfp4_512.go): ntiles tiles of 32 consecutive
// stored rows down the rows, in each tile ngroups 32-element groups one
// after the other (codes 16 bytes apart, scales scaleStride apart, output
// 32 rows further), the next tile's rows prefetched first. A group of a
// tile: its 32 scales (the group's column of the scales, made contiguous
// by the caller) checked against the table's range (one outside ends the
// call) and made exponent adjustments; the 32 rows'
// 16 code bytes transposed to byte positions (VPERMI2B, then VPERMI2Q
// twice) so that byte position j holds the 32 rows' bytes in order;
// each position zero-extended to words (elements 2j, and 2j+1 shifted
// down 4) and looked up with VPERMW in the 16 values (twice in 32 words,
// so the high nibble's low bit left in an index does not matter); the
// adjustment added to nonzero values; 64 bytes stored a output row.
// R8 points at the mxfp4Tab512 (offsets fixed in mxfp4_512.go).
// Z28 the table, Z29 0x7fff, Z30 the tile's adjustments; Z0-Z23 the
// tile.

// EMIT looks up the word indices in Z, adjusts, stores at (R12) and
// steps R12 to the next output row.
#define EMIT(Z) \
	VPERMW Z28, Z, Z \
	VPTESTMW Z29, Z, K1 \
	VPADDW Z30, Z, K1, Z \
	VMOVDQU64 Z, (R12) \
	ADDQ BX, R12

// POS emits byte positions 2a (low half of ZA) and 2a+1 (high half):
// output rows 4a .. 4a+3.
#define POS(ZA, YA) \
	VPMOVZXBW YA, Z20 \
	VPSRLW $4, Z20, Z21 \
	VEXTRACTI64X4 $1, ZA, Y22 \
	VPMOVZXBW Y22, Z22 \
	VPSRLW $4, Z22, Z23 \
	EMIT(Z20) \
	EMIT(Z21) \
	EMIT(Z22) \
	EMIT(Z23)

// LOAD4 puts stored rows at (R12), +CX, +2CX, +3CX in the four lanes
// of ZM and steps R12 by 4 rows.
#define LOAD4(ZM, XM) \
	VMOVDQU (R12), XM \
	VINSERTI32X4 $1, (R12)(CX*1), ZM, ZM \
	LEAQ (R12)(CX*2), R12 \
	VINSERTI32X4 $2, (R12), ZM, ZM \
	VINSERTI32X4 $3, (R12)(CX*1), ZM, ZM \
	LEAQ (R12)(CX*2), R12

// PF1 prefetches the groups' bytes of the stored row at R14 (the lines
// of the first and the last) and steps R14 to the next row; PF8 does 8.
#define PF1 \
	PREFETCHT0 (R14) \
	PREFETCHT0 (R14)(R15*1) \
	ADDQ CX, R14

#define PF8 PF1 \
	PF1 \
	PF1 \
	PF1 \
	PF1 \
	PF1 \
	PF1 \
	PF1

// func mxfp4T32AVX512(dst *byte, rowStride int, src *byte, srcStride int, scales *byte, scaleStride, ngroups, ntiles int, t *mxfp4Tab512) int
TEXT ·mxfp4T32AVX512(SB), NOSPLIT, $24-80
	MOVQ dst+0(FP), DI
	MOVQ rowStride+8(FP), BX
	MOVQ src+16(FP), SI
	MOVQ srcStride+24(FP), CX
	MOVQ scales+32(FP), DX
	MOVQ ngroups+48(FP), R15
	MOVQ ntiles+56(FP), R10
	MOVQ t+64(FP), R8
	XORQ R11, R11
	VMOVDQU64 0(R8), Z28
	VMOVDQU64 64(R8), Z29
	// Per tile: R13 = 32 stored rows of codes.
	MOVQ CX, R13
	SHLQ $5, R13
	// 16(SP) the groups a tile, R15 the last code byte of a row's groups.
	MOVQ R15, 16(SP)
	SHLQ $4, R15
	DECQ R15

tile:
	CMPQ R11, R10
	JGE  done
	// A group of the tile: AX its scales, R9 its codes, R12 its output
	// (saved at 0(SP) while the rows load), 8(SP) the groups left;
	// SI, DI, DX the tile's first group.
	// The next tile's rows to the cache: their first and last lines.
	LEAQ (SI)(R13*1), R14
	PF8
	PF8
	PF8
	PF8
	MOVQ DX, AX
	MOVQ SI, R9
	MOVQ DI, R12
	MOVQ 16(SP), R14
	MOVQ R14, 8(SP)

group:
	CMPQ 8(SP), $0
	JLE  next
	VPMOVZXBW (AX), Z0
	VPSUBW 128(R8), Z0, Z1
	VPCMPUW $6, 192(R8), Z1, K1
	KORTESTD K1, K1
	JNZ  done
	VPSUBW 256(R8), Z0, Z30
	VPMULLW 320(R8), Z30, Z30

	MOVQ R12, 0(SP)
	MOVQ R9, R12
	LOAD4(Z0, X0)
	LOAD4(Z1, X1)
	LOAD4(Z2, X2)
	LOAD4(Z3, X3)
	LOAD4(Z4, X4)
	LOAD4(Z5, X5)
	LOAD4(Z6, X6)
	LOAD4(Z7, X7)

	// Eight stored rows to 16 byte positions x 8 rows (qword j: byte
	// position j, or 8+j, of the 8 rows).
	VMOVDQU64 384(R8), Z8
	VPERMI2B Z1, Z0, Z8
	VMOVDQU64 448(R8), Z9
	VPERMI2B Z1, Z0, Z9
	VMOVDQU64 384(R8), Z10
	VPERMI2B Z3, Z2, Z10
	VMOVDQU64 448(R8), Z11
	VPERMI2B Z3, Z2, Z11
	VMOVDQU64 384(R8), Z12
	VPERMI2B Z5, Z4, Z12
	VMOVDQU64 448(R8), Z13
	VPERMI2B Z5, Z4, Z13
	VMOVDQU64 384(R8), Z14
	VPERMI2B Z7, Z6, Z14
	VMOVDQU64 448(R8), Z15
	VPERMI2B Z7, Z6, Z15

	// Positions 0-7: pairs of row octets, then all four.
	VMOVDQU64 512(R8), Z16
	VPERMI2Q Z10, Z8, Z16
	VMOVDQU64 576(R8), Z17
	VPERMI2Q Z10, Z8, Z17
	VMOVDQU64 512(R8), Z18
	VPERMI2Q Z14, Z12, Z18
	VMOVDQU64 576(R8), Z19
	VPERMI2Q Z14, Z12, Z19
	VMOVDQU64 640(R8), Z0
	VPERMI2Q Z18, Z16, Z0
	VMOVDQU64 704(R8), Z1
	VPERMI2Q Z18, Z16, Z1
	VMOVDQU64 640(R8), Z2
	VPERMI2Q Z19, Z17, Z2
	VMOVDQU64 704(R8), Z3
	VPERMI2Q Z19, Z17, Z3
	// Positions 8-15.
	VMOVDQU64 512(R8), Z16
	VPERMI2Q Z11, Z9, Z16
	VMOVDQU64 576(R8), Z17
	VPERMI2Q Z11, Z9, Z17
	VMOVDQU64 512(R8), Z18
	VPERMI2Q Z15, Z13, Z18
	VMOVDQU64 576(R8), Z19
	VPERMI2Q Z15, Z13, Z19
	VMOVDQU64 640(R8), Z4
	VPERMI2Q Z18, Z16, Z4
	VMOVDQU64 704(R8), Z5
	VPERMI2Q Z18, Z16, Z5
	VMOVDQU64 640(R8), Z6
	VPERMI2Q Z19, Z17, Z6
	VMOVDQU64 704(R8), Z7
	VPERMI2Q Z19, Z17, Z7

	MOVQ 0(SP), R12
	POS(Z0, Y0)
	POS(Z1, Y1)
	POS(Z2, Y2)
	POS(Z3, Y3)
	POS(Z4, Y4)
	POS(Z5, Y5)
	POS(Z6, Y6)
	POS(Z7, Y7)

	// R12 has stepped over this group's 32 output rows.
	ADDQ scaleStride+40(FP), AX
	ADDQ $16, R9
	DECQ 8(SP)
	JMP  group

next:
	ADDQ $64, DI
	ADDQ R13, SI
	ADDQ $32, DX
	INCQ R11
	JMP  tile

done:
	MOVQ R11, ret+72(FP)
	VZEROUPPER
	RET
