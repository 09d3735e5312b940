//go:build !amd64 || purego

package lora

const vecCols = 64

const haveVec = false

func addRowVec(c, l, rm *float32, n, r, cols int, s float32) { panic("lora: no vector kernel") }

func decodeBF16Vec(dst *float32, src *uint16, n int) { panic("lora: no vector kernel") }
func encodeBF16Vec(dst *uint16, src *float32, n int) { panic("lora: no vector kernel") }
