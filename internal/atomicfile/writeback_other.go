//go:build !linux

package atomicfile

// freerunNow is 0 where the write-back threshold is not known:
// no output bytes go through the page cache on purpose (without direct I/O
// they are ordinary writes all the same).
func freerunNow() int64 { return 0 }
