//go:build amd64 && !purego

package quant

import "golang.org/x/sys/cpu"

// haveFP8Vec, haveF16C and haveFP8Vec512 pick the AVX2 kernels, the
// AVX2 float16 kernel and the AVX-512 ones; tests turn them off to hold
// every path to the same bits.
var (
	haveFP8Vec = cpu.X86.HasAVX2
	// F16C, which x/sys/cpu does not report, came before FMA on every
	// x86 CPU that has both (Intel Ivy Bridge, AMD Piledriver).
	haveF16C      = cpu.X86.HasAVX2 && cpu.X86.HasFMA
	haveFP8Vec512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ &&
		cpu.X86.HasAVX512VBMI && cpu.X86.HasAVX512BF16
)

// fp8BF16AVX2 is fp8VecGo to bfloat16 for len(src) codes (a multiple of
// 16), dst 2*len(src) bytes.
//
//go:noescape
func fp8BF16AVX2(dst, src []byte, s float32, k *fp8Consts)

// fp8F16AVX2 is fp8VecGo to float16 for len(src) codes (a multiple of
// 16), dst 2*len(src) bytes.
//
//go:noescape
func fp8F16AVX2(dst, src []byte, s float32, k *fp8Consts)

// fp8F32AVX2 is fp8VecGo to float32 for len(src) codes (a multiple of
// 16), dst 4*len(src) bytes.
//
//go:noescape
func fp8F32AVX2(dst, src []byte, s float32, k *fp8Consts)

// The AVX-512 kernels of fp8Seg: n codes (a multiple of 64) from src,
// starting off codes into a block of bw (both multiples of 64), block i
// scaled by scales[i]. They stop before the first 64 codes whose
// products hold a NaN or a subnormal and return the codes written.
//
//go:noescape
func fp8BF16AVX512(dst, src *byte, n int, scales *float32, bw, off int, t *fp8Tab512) int

//go:noescape
func fp8F16AVX512(dst, src *byte, n int, scales *float32, bw, off int, t *fp8Tab512) int

//go:noescape
func fp8F32AVX512(dst, src *byte, n int, scales *float32, bw, off int, t *fp8Tab512) int

// fp8Kernel512 runs o's AVX-512 kernel on q (len a multiple of 64).
func fp8Kernel512(o fp8Out, out, q []byte, scales []float32, bw, off int, t *fp8Tab512) int {
	_ = out[o.size()*len(q)-1]
	_ = scales[(off+len(q)-1)/bw]
	switch o {
	case fp8ToBF16:
		return fp8BF16AVX512(&out[0], &q[0], len(q), &scales[0], bw, off, t)
	case fp8ToF16:
		return fp8F16AVX512(&out[0], &q[0], len(q), &scales[0], bw, off, t)
	}
	return fp8F32AVX512(&out[0], &q[0], len(q), &scales[0], bw, off, t)
}

// mxfp4T16AVX2 is mxfp4T16Go: 32 output rows (rowStride bytes apart) of
// 16 bfloat16 each, from 16 stored rows' 16-byte groups (srcStride apart).
//
//go:noescape
func mxfp4T16AVX2(dst *byte, rowStride int, src *byte, srcStride int, adj *[16]uint16, k *mxfp4VecConsts)

// haveFP8Tab512 picks the table decode (fp8_tab.go; VBMI's VPERMI2B);
// tests turn it off to hold it to fp8Seg's bits.
var haveFP8Tab512 = haveFP8Vec512

// fp8TabBF16AVX512 writes the bfloat16 products of n codes (a multiple of
// 64) from src, starting off codes into a block of bw (both multiples of
// 64), block i's table at tabs[i*fp8TabBytes:].
//
//go:noescape
func fp8TabBF16AVX512(dst, src *byte, n int, tabs *byte, bw, off int, perm *[64]byte)

// fp8TabSplit writes the low bytes of the 256 little-endian bfloat16 of
// prod into tab[:256], their high bytes into tab[256:].
//
//go:noescape
func fp8TabSplit(tab, prod *[512]byte)
