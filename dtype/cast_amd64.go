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

// vector runs kernel over the whole groups of 16 elements (fs bytes each
// in src, ts in dst) where use is set, rest over what is left.
func vector(dst, src []byte, fs, ts int, use bool, kernel func(dst, src *byte, n int), rest Caster) {
	n := len(src) / fs
	if v := n &^ 15; use && v > 0 {
		_ = dst[ts*v-1]
		kernel(&dst[0], &src[0], v)
		dst, src = dst[ts*v:], src[fs*v:]
	}
	rest(dst, src)
}

func castF32ToBF16(dst, src []byte) { vector(dst, src, 4, 2, useAVX2, f32ToBF16AVX2, castF32ToBF16Go) }
func castF32ToF16(dst, src []byte)  { vector(dst, src, 4, 2, useF16C, f32ToF16AVX2, castF32ToF16Go) }
func castBF16ToF32(dst, src []byte) { vector(dst, src, 2, 4, useAVX2, bf16ToF32AVX2, castBF16ToF32Go) }
