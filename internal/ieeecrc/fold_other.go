//go:build !amd64

package ieeecrc

const haveFold4 = false

func fold4(state uint32, p []byte, out *[64]byte) { panic("ieeecrc: fold4 without AVX-512") }
