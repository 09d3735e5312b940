//go:build !unix

package verify

// userNS and cpuNS have no rusage here: the benchmarks report 0.
func userNS() int64 { return 0 }

func cpuNS() int64 { return 0 }
