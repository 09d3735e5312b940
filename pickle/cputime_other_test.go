//go:build !unix

package pickle

import "time"

var processStart = time.Now()

// cpuTime has no rusage here: the wall time since the test binary
// started stands in (an upper bound only for one busy thread).
func cpuTime() time.Duration { return time.Since(processStart) }
