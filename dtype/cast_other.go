//go:build !amd64 || purego

package dtype

func castF32ToBF16(dst, src []byte) { castF32ToBF16Go(dst, src) }
func castF32ToF16(dst, src []byte)  { castF32ToF16Go(dst, src) }
func castBF16ToF32(dst, src []byte) { castBF16ToF32Go(dst, src) }

// vectorCasts reports whether the vector kernels are in use.
func vectorCasts() (bf16, f16 bool) { return false, false }

func vecDecodeBF16(dst []float32, src []byte) int { return 0 }
func vecEncodeBF16(dst []byte, src []float32) int { return 0 }
func vecEncodeF16(dst []byte, src []float32) int  { return 0 }
