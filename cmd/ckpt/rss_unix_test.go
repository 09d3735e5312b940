//go:build unix

package main

import (
	"os"
	"syscall"
)

// peakRSS is the finished process's peak resident set in bytes (0 where
// unknown).
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
		return ru.Maxrss << 10 // KiB on Linux
	}
	return 0
}
