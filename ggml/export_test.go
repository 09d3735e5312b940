package ggml

// SetAsm turns the assembly kernels on or off (when present) and returns
// the previous setting.
func SetAsm(on bool) bool {
	old := useAsm
	useAsm = on && asmAvailable
	return old
}
