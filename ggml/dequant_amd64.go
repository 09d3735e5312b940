//go:build amd64 && !purego

package ggml

// useAsm selects the SSE2 kernels of dequant_amd64.s (SSE2 is part of
// every amd64 CPU). Tests turn it off to check the Go code too.
var useAsm = true

const asmAvailable = true

//go:noescape
func deqQ8SSE(src *byte, dst *float32, scales *float32, nb int, stride int)

//go:noescape
func deqQ4KSSE(src *byte, dst *float32, params *float32, nb int)
