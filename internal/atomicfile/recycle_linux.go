package atomicfile

import "golang.org/x/sys/unix"

// sysThreadCPU returns the calling thread's id and the CPU time it has used,
// in nanoseconds (0, 0 where unknown).
func sysThreadCPU() (int, int64) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0, 0
	}
	return unix.Gettid(), ts.Nano()
}
