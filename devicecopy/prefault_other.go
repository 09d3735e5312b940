//go:build !linux

package devicecopy

// prefault does nothing where MADV_POPULATE_WRITE is not known: pages
// fault in as a read writes them.
func prefault([]byte) {}
