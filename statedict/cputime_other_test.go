//go:build !unix

package statedict_test

import "time"

// cpuTime is not measured here: the wall-clock bound alone applies.
func cpuTime() time.Duration { return 0 }
