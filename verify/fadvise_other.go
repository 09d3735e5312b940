//go:build !linux

package verify

import "os"

// willNeed: no read-ahead hint on this platform.
func willNeed(f *os.File, off, n int64) {}
