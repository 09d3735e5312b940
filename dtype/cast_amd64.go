//go:build amd64 && !purego

package dtype

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The vector kernels (cast_amd64.s) take whole groups of 16 elements;
// the Go loops do the rest.

//go:noescape
func f32ToBF16AVX2(dst, src *byte, n int)

//go:noescape
func f32ToBF16AVX512(dst, src *byte, n int)

//go:noescape
func f32ToF16AVX2(dst, src *byte, n int)

//go:noescape
func bf16ToF32AVX2(dst, src *byte, n int)

// cpuidECX1 returns ECX of CPUID leaf 1 (bit 29: F16C).
func cpuidECX1() uint32

// Which kernels run: package switches, so that tests can force each
// path (TestCastPaths). useAVX512 takes the float32 to bfloat16 cast only,
// and only where useAVX2 is also set.
var (
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
	useF16C   = cpu.X86.HasAVX2 && cpuidECX1()&(1<<29) != 0
)

// vectorCasts reports whether the vector kernels are in use.
func vectorCasts() (bf16, f16 bool) { return useAVX2, useF16C }

// f32ToBF16Vec is the float32 to bfloat16 kernel in use (n a multiple of
// 16; useAVX2 set).
func f32ToBF16Vec(dst, src *byte, n int) {
	if useAVX512 {
		f32ToBF16AVX512(dst, src, n)
		return
	}
	f32ToBF16AVX2(dst, src, n)
}

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

func castF32ToBF16(dst, src []byte) { vector(dst, src, 4, 2, useAVX2, f32ToBF16Vec, castF32ToBF16Go) }

// The float32-slice forms behind DecodeFloat32 and EncodeFloat32: the
// whole groups of 16 elements through the vector kernels (amd64 is
// little-endian, so a []float32's bytes are its little-endian encoding),
// returning how many elements they did; the caller's loop does the rest.

func vecDecodeBF16(dst []float32, src []byte) int {
	v := len(dst) &^ 15
	if !useAVX2 || v == 0 {
		return 0
	}
	_, _ = dst[v-1], src[2*v-1]
	bf16ToF32AVX2((*byte)(unsafe.Pointer(&dst[0])), &src[0], v)
	return v
}

func vecEncodeBF16(dst []byte, src []float32) int {
	v := len(src) &^ 15
	if !useAVX2 || v == 0 {
		return 0
	}
	_, _ = dst[2*v-1], src[v-1]
	f32ToBF16Vec(&dst[0], (*byte)(unsafe.Pointer(&src[0])), v)
	return v
}

func vecEncodeF16(dst []byte, src []float32) int {
	v := len(src) &^ 15
	if !useF16C || v == 0 {
		return 0
	}
	_, _ = dst[2*v-1], src[v-1]
	f32ToF16AVX2(&dst[0], (*byte)(unsafe.Pointer(&src[0])), v)
	return v
}
func castF32ToF16(dst, src []byte)  { vector(dst, src, 4, 2, useF16C, f32ToF16AVX2, castF32ToF16Go) }
func castBF16ToF32(dst, src []byte) { vector(dst, src, 2, 4, useAVX2, bf16ToF32AVX2, castBF16ToF32Go) }
