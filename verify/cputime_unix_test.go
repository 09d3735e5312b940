//go:build unix

package verify

import "syscall"

// userNS is the process's user CPU time in nanoseconds (the machine is
// shared: wall time is the neighbours' as much as the kernel's).
func userNS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano()
}

// cpuNS is the process's user and system CPU time in nanoseconds.
func cpuNS() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
