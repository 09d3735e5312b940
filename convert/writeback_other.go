//go:build !linux

package convert

// writeBackThreshold is 0 where the write-back threshold is not known:
// every output is synced.
func writeBackThreshold() int64 { return 0 }
