//go:build !amd64 || purego

package ggml

var useAsm = false

const asmAvailable = false

func deqQ8SSE(src *byte, dst *float32, scales *float32, nb int, stride int) {
	panic("ggml: no assembly kernels")
}

func deqQ4KSSE(src *byte, dst *float32, params *float32, nb int) { panic("ggml: no assembly kernels") }
