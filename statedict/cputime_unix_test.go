//go:build unix

package statedict_test

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the test process has used so
// far, on every thread: what a case costs, whatever else shares the
// machine's cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
