//go:build amd64 && !purego

package ggml

// quantQ8SSE quantizes up to nb blocks of 32 float32 at src to Q8_0 at
// dst (quant_amd64.s) and returns how many it did: it stops before a
// block that needs quantQ8_0Block's slow paths (a NaN, or amax zero,
// infinite or too small for 1/d).
//
//go:noescape
func quantQ8SSE(src *float32, dst *byte, nb int) int
