//go:build !linux

package atomicfile

import (
	"errors"
	"os"
)

// copyFileRange is Linux's; elsewhere every RangeReader is read.
func copyFileRange(*os.File, int64, *os.File, int64, int64) (int64, error) {
	return 0, errors.ErrUnsupported
}
