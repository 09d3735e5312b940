//go:build !linux

package atomicfile

import "os"

// sysSyncRange: sync_file_range is Linux's; elsewhere the output is left
// to the kernel's write-back.
func sysSyncRange(*os.File, int64, int64, bool) error { return errNoWriteBehind }
