//go:build amd64 && !purego

#include "textflag.h"

// quantQ8SSE: ggml's quantize_row_q8_0_ref, four lanes at a time, with
// the float32 operations of the Go code (quantQ8_0Block) and of ggml's C,
// each rounded alike:
//   amax = max |x|; d = amax/127; id = 1/d;
//   y.d = fp16(d) (ggml's fp32_to_fp16: two multiplies, one add);
//   y.qs[j] = roundf(x[j]*id), as x*id + copysign(0.49999997, x*id)
//   truncated, which is roundf exactly for |x*id| < 2^23.
// max over finite magnitudes does not depend on the order, so the
// vectorized reduction gives the scalar loop's amax. A block the kernel
// cannot do shows as a quant of -128, which no other block has (there
// |x*id| <= 127 plus rounding): a NaN (x*id is NaN); an infinity
// (d = Inf, id = 0, Inf*0 is NaN); amax zero or so small that 1/d
// overflows (id = Inf, x*id infinite or 0*Inf); all convert to
// MinInt32, which packs to -128. The kernel stops before such a block:
// the caller does it in Go and calls again.

// LOAD8 loads the block of 32 float32 at SI into X0-X7.
#define LOAD8 \
	MOVUPS 0(SI), X0 \
	MOVUPS 16(SI), X1 \
	MOVUPS 32(SI), X2 \
	MOVUPS 48(SI), X3 \
	MOVUPS 64(SI), X4 \
	MOVUPS 80(SI), X5 \
	MOVUPS 96(SI), X6 \
	MOVUPS 112(SI), X7

// ROUND8 sets X to roundf(X*X8) as int32: the product plus
// copysign(0.49999997, product), truncated. Clobbers X9.
#define ROUND8(X) \
	MULPS X8, X \
	MOVAPS X, X9 \
	ANDPS X14, X9 \
	ORPS X13, X9 \
	ADDPS X9, X \
	CVTTPS2PL X, X

// func quantQ8SSE(src *float32, dst *byte, nb int) int
TEXT ·quantQ8SSE(SB), NOSPLIT, $0-32
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ nb+16(FP), CX
	XORQ R8, R8
	TESTQ CX, CX
	JLE done
	MOVL $0x7fffffff, AX
	MOVL AX, X15
	SHUFPS $0, X15, X15 // |.| mask
	MOVL $0x80000000, AX
	MOVL AX, X14
	SHUFPS $0, X14, X14 // sign mask
	MOVL $0x3effffff, AX
	MOVL AX, X13
	SHUFPS $0, X13, X13 // 0.49999997
	MOVL $0x80808080, AX
	MOVL AX, X12
	PSHUFL $0, X12, X12 // int8 -128
	MOVL $0x42fe0000, AX
	MOVL AX, X11 // 127

loop:
	LOAD8
	ANDPS X15, X0
	ANDPS X15, X1
	ANDPS X15, X2
	ANDPS X15, X3
	ANDPS X15, X4
	ANDPS X15, X5
	ANDPS X15, X6
	ANDPS X15, X7
	MAXPS X1, X0
	MAXPS X3, X2
	MAXPS X5, X4
	MAXPS X7, X6
	MAXPS X2, X0
	MAXPS X6, X4
	MAXPS X4, X0
	MOVHLPS X0, X1
	MAXPS X1, X0
	PSHUFL $1, X0, X1
	MAXSS X1, X0 // amax
	DIVSS X11, X0 // d = amax/127
	MOVL $0x3f800000, AX
	MOVL AX, X8
	DIVSS X0, X8 // id = 1/d

	// y.d: ggml's fp32_to_fp16 of d (> 0, finite).
	MOVL X0, AX
	MOVL $0x77800000, BX
	MOVL BX, X1
	MULSS X1, X0 // *0x1p112
	MOVL $0x08800000, BX
	MOVL BX, X1
	MULSS X1, X0 // *0x1p-110: base
	LEAL (AX)(AX*1), BX
	ANDL $0xff000000, BX
	MOVL $0x71000000, DX
	CMPL BX, DX
	CMOVLCS DX, BX // bias = max(bias, 0x71000000)
	SHRL $1, BX
	ADDL $0x07800000, BX
	MOVL BX, X1
	ADDSS X1, X0
	MOVL X0, BX
	MOVL BX, DX
	SHRL $13, BX
	ANDL $0x7c00, BX
	ANDL $0x0fff, DX
	ADDL DX, BX
	MOVW BX, 0(DI)

	// y.qs
	SHUFPS $0, X8, X8
	LOAD8
	ROUND8(X0)
	ROUND8(X1)
	ROUND8(X2)
	ROUND8(X3)
	ROUND8(X4)
	ROUND8(X5)
	ROUND8(X6)
	ROUND8(X7)
	PACKSSLW X1, X0
	PACKSSLW X3, X2
	PACKSSWB X2, X0
	PACKSSLW X5, X4
	PACKSSLW X7, X6
	PACKSSWB X6, X4
	MOVOU X0, 2(DI)
	MOVOU X4, 18(DI)
	PCMPEQB X12, X0
	PCMPEQB X12, X4
	POR X4, X0
	PMOVMSKB X0, AX
	TESTL AX, AX
	JNZ done // a NaN

	ADDQ $128, SI
	ADDQ $34, DI
	INCQ R8
	DECQ CX
	JNZ loop
done:
	MOVQ R8, ret+24(FP)
	RET
