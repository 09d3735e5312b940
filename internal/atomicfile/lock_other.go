//go:build !unix

package atomicfile

import "os"

// lockTemp does nothing where flock is missing.
func lockTemp(*os.File) {}

// orphaned reports false where flock is missing: without a lock, a
// temporary file cannot be told from one a live conversion is writing.
func orphaned(*os.File) bool { return false }

// nonBlock is 0 where O_NONBLOCK is missing.
const nonBlock = 0
