//go:build !amd64

package digest

const haveStripes8 = false

func stripes8(ptrs *[8]*byte, acc *[32]uint64) { panic("digest: stripes8 without AVX-512") }
