//go:build amd64 && !purego

package dtype

import "golang.org/x/sys/cpu"

// The vector kernels (cast_amd64.s) take whole groups of 16 elements;
// the Go loops do the rest.

//go:noescape
func f32ToBF16AVX2(dst, src *byte, n int)

//go:noescape
func f32ToF16AVX2(dst, src *byte, n int)

//go:noescape
func bf16ToF32AVX2(dst, src *byte, n int)

// cpuidECX1 returns ECX of CPUID leaf 1 (bit 29: F16C).
func cpuidECX1() uint32

var (
	useAVX2 = cpu.X86.HasAVX2
	useF16C = cpu.X86.HasAVX2 && cpuidECX1()&(1<<29) != 0
)

// vectorCasts reports whether the vector kernels are in use.
func vectorCasts() (bf16, f16 bool) { return useAVX2, useF16C }

func castF32ToBF16(dst, src []byte) {
	n := len(src) / 4
	if v := n &^ 15; useAVX2 && v > 0 {
		_ = dst[2*v-1]
		f32ToBF16AVX2(&dst[0], &src[0], v)
		dst, src = dst[2*v:], src[4*v:]
	}
	castF32ToBF16Go(dst, src)
}

func castF32ToF16(dst, src []byte) {
	n := len(src) / 4
	if v := n &^ 15; useF16C && v > 0 {
		_ = dst[2*v-1]
		f32ToF16AVX2(&dst[0], &src[0], v)
		dst, src = dst[2*v:], src[4*v:]
	}
	castF32ToF16Go(dst, src)
}

func castBF16ToF32(dst, src []byte) {
	n := len(src) / 2
	if v := n &^ 15; useAVX2 && v > 0 {
		_ = dst[4*v-1]
		bf16ToF32AVX2(&dst[0], &src[0], v)
		dst, src = dst[4*v:], src[2*v:]
	}
	castBF16ToF32Go(dst, src)
}
