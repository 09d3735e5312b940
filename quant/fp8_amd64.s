//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels of fp8_vec.go: eight float8 codes per register, decoded
// by the bit trick, times the block's scale, to float32 or bfloat16.
// R8 points at the fp8Consts (offsets: mag 0, sign 32, expAdd 64,
// inf 96, nanMin 128, infF 160, nanF 192, one 224, r7fff 256, bfNaN 288,
// subC 320, subMax 352, shift 384, exp1 416, f16NaN 448); X11 holds the shift, Y10 the
// broadcast scale.

// DECODE8 leaves in YOUT the float32 products of the 8 codes at OFF(SI);
// NANFIX(Y4 mask, Y3 value) sets the NaN codes. Clobbers Y0-Y5.
#define DECODE8(OFF, YOUT, NANFIX) \
	VPMOVZXBD OFF(SI), Y0 \
	VPAND 0(R8), Y0, Y1 \
	VPXOR Y1, Y0, Y2 \
	VPSLLD $24, Y2, Y2 \
	VPSLLD X11, Y1, Y3 \
	VPADDD 64(R8), Y3, Y3 \
	VPCMPGTD 352(R8), Y1, Y4 \
	VPANDN 416(R8), Y4, Y5 \
	VPADDD Y5, Y3, Y3 \
	VPANDN 320(R8), Y4, Y5 \
	VSUBPS Y5, Y3, Y3 \
	VPCMPEQD 96(R8), Y1, Y4 \
	VPAND 160(R8), Y4, Y4 \
	VPOR Y4, Y3, Y3 \
	VPOR Y2, Y3, Y3 \
	VPCMPGTD 128(R8), Y1, Y4 \
	NANFIX \
	VMULPS Y10, Y3, YOUT

// For bfloat16 any NaN will do (BF16 makes it 0x7fc0): all ones.
#define NANOR VPOR Y4, Y3, Y3
// For float32, the table path's NaN, float32(math.NaN()).
#define NANSET VBLENDVPS Y4, 192(R8), Y3, Y3

// BF16 rounds the float32s of Y to bfloat16 (nearest even, NaN 0x7fc0)
// in the low half of each lane. Clobbers Y4, Y5.
#define BF16(Y) \
	VCMPPS $3, Y, Y, Y4 \
	VPSRLD $16, Y, Y5 \
	VPAND 224(R8), Y5, Y5 \
	VPADDD 256(R8), Y5, Y5 \
	VPADDD Y, Y5, Y5 \
	VPSRLD $16, Y5, Y5 \
	VBLENDVPS Y4, 288(R8), Y5, Y

// ARGS loads both kernels' arguments (dst, src []byte, s float32,
// k *fp8Consts): DI, SI, CX the 16-code steps, Y10 the scale, R8 the
// constants, X11 the shift; ZF set when there is no step.
#define ARGS \
	MOVQ dst_base+0(FP), DI \
	MOVQ src_base+24(FP), SI \
	MOVQ src_len+32(FP), CX \
	VBROADCASTSS s+48(FP), Y10 \
	MOVQ k+56(FP), R8 \
	MOVQ 384(R8), AX \
	MOVQ AX, X11 \
	SHRQ $4, CX

// func fp8BF16AVX2(dst, src []byte, s float32, k *fp8Consts)
TEXT ·fp8BF16AVX2(SB), NOSPLIT, $0-64
	ARGS
	JZ bfdone
bfloop:
	DECODE8(0, Y6, NANOR)
	DECODE8(8, Y7, NANOR)
	BF16(Y6)
	BF16(Y7)
	VPACKUSDW Y7, Y6, Y6
	VPERMQ $0xD8, Y6, Y6
	VMOVDQU Y6, (DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ bfloop
bfdone:
	VZEROUPPER
	RET

// func fp8F32AVX2(dst, src []byte, s float32, k *fp8Consts)
TEXT ·fp8F32AVX2(SB), NOSPLIT, $0-64
	ARGS
	JZ fdone
floop:
	DECODE8(0, Y6, NANSET)
	DECODE8(8, Y7, NANSET)
	VMOVDQU Y6, (DI)
	VMOVDQU Y7, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JNZ floop
fdone:
	VZEROUPPER
	RET

// F16 rounds the float32s of Y to float16 (nearest even) in X: a NaN
// keeps its sign and quiet bit only (sign|0x7e00, as dtype.F32ToF16).
// Clobbers Y4, Y5.
#define F16(Y, X) \
	VCMPPS $3, Y, Y, Y4 \
	VANDPS 448(R8), Y, Y5 \
	VBLENDVPS Y4, Y5, Y, Y \
	VCVTPS2PH $0, Y, X

// func fp8F16AVX2(dst, src []byte, s float32, k *fp8Consts)
TEXT ·fp8F16AVX2(SB), NOSPLIT, $0-64
	ARGS
	JZ hdone
hloop:
	DECODE8(0, Y6, NANSET)
	DECODE8(8, Y7, NANSET)
	F16(Y6, X6)
	F16(Y7, X7)
	VMOVDQU X6, (DI)
	VMOVDQU X7, 16(DI)
	ADDQ $16, SI
	ADDQ $32, DI
	DECQ CX
	JNZ hloop
hdone:
	VZEROUPPER
	RET
