//go:build !linux || !(amd64 || arm64)

package fadvise

import "os"

// WillNeed does nothing on this platform.
func WillNeed(f *os.File, off, n int64) {}

// DontNeed does nothing on this platform.
func DontNeed(f *os.File, off, n int64) {}
