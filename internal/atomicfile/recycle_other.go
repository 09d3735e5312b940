//go:build !linux

package atomicfile

// sysThreadCPU is unknown here: Writers do not measure their writes (and do
// not write behind: sync_file_range is Linux's).
func sysThreadCPU() (int, int64) { return 0, 0 }
