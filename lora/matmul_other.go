//go:build !amd64 || purego

package lora

const vecCols = 64

const haveVec = false

func addRowVec(c, l, rm *float32, n, r, cols int, s float32) { panic("lora: no vector kernel") }
