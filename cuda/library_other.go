//go:build !linux

package cuda

// OpenLibrary is Open for the CUDA driver library at path; like Open, it
// works on Linux only and elsewhere returns an error matching ErrNoDriver.
func OpenLibrary(path string) (*Driver, error) {
	return nil, &LoadError{Library: path, Reason: "ckpt binds the CUDA driver on Linux only", Err: ErrNoDriver}
}
