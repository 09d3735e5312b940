//go:build !linux

package convert

import "os"

// openDirect returns nil: direct I/O is used on Linux only.
func openDirect(string) *os.File { return nil }
