package ggml

// SetAsm turns the assembly kernels on or off (when present) and returns
// the previous setting.
func SetAsm(on bool) bool {
	old := useAsm
	useAsm = on && asmAvailable
	return old
}

// Q8Kernel runs the Q8_0 assembly kernel alone over whole blocks of src
// into dst and returns how many blocks it did (-1 without the kernel).
func Q8Kernel(src []float32, dst []byte) int {
	nb := len(src) / 32
	if !asmAvailable || nb == 0 {
		return -1
	}
	_ = dst[34*nb-1]
	return quantQ8SSE(&src[0], &dst[0], nb)
}
