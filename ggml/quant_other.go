//go:build !amd64 || purego

package ggml

func quantQ8SSE(src *float32, dst *byte, nb int) int { panic("ggml: no assembly kernels") }
