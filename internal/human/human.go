// Package human renders values for people reading ckpt's messages and
// reports: byte counts in IEC units and the kinds of files.
package human

import (
	"fmt"
	"io/fs"
)

// Bytes renders a byte count in IEC units: 512 B, 1.50 KiB, 3.2 GiB (two
// decimals under 10, one above); "?" for a negative count.
func Bytes(n int64) string {
	if n < 0 {
		return "?"
	}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		f /= 1024
		if f < 1024 || u == "PiB" {
			if f < 10 {
				return fmt.Sprintf("%.2f %s", f, u)
			}
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return ""
}

// FileKind names the type of a file that is not a regular file, for
// messages: "a FIFO", "a directory", "a character device".
func FileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDir != 0:
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file"
}
