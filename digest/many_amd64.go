package digest

import "golang.org/x/sys/cpu"

// haveStripes8 reports whether stripes8 can run: AVX-512 F and DQ, with
// the operating system saving the registers.
var haveStripes8 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

//go:noescape
func stripes8(ptrs *[8]*byte, acc *[32]uint64)
