//go:build !linux

package cuda

// loadDriver reports that the CUDA driver binding exists only on Linux.
func loadDriver() (*api, error) {
	return nil, &LoadError{Library: driverLibraryName, Reason: "ckpt binds the CUDA driver on Linux only", Err: ErrNoDriver}
}

// loadLibrary reports that the CUDA driver binding exists only on Linux.
func loadLibrary(name string) (*api, error) {
	return nil, &LoadError{Library: name, Reason: "ckpt binds the CUDA driver on Linux only", Err: ErrNoDriver}
}
