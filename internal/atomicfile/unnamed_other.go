//go:build !linux

package atomicfile

import (
	"errors"
	"os"
)

// openDirect returns nil: direct I/O is used on Linux only.
func openDirect(*os.File) *os.File { return nil }

var errNoUnnamed = errors.New("unnamed temporary files are used on Linux only")

// openUnnamed fails: O_TMPFILE is Linux's; other systems use named
// temporary files.
func openUnnamed(string) (*os.File, error) { return nil, errNoUnnamed }

// linkUnnamed is never called where openUnnamed fails.
func linkUnnamed(*os.File, string) error { return errNoUnnamed }
