//go:build !unix

package statedict

import "os"

// nonBlock is 0 where O_NONBLOCK is missing.
const nonBlock = 0

// clearNonBlock has nothing to do where O_NONBLOCK is missing.
func clearNonBlock(*os.File) error { return nil }

// freeSpace is unknown here.
func freeSpace(string) (int64, bool) { return 0, false }
