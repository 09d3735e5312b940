//go:build !linux || !(amd64 || arm64)

package verify

import "os"

// willNeed: no read-ahead hint on this platform.
func willNeed(f *os.File, off, n int64) {}
