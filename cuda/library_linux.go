package cuda

// OpenLibrary is Open for the CUDA driver library at path instead of the
// system's libcuda.so.1. It exists for tests (a fake driver) and for
// diagnosing a driver installed outside the loader's search path; `ckpt
// load` uses it when CKPT_LIBCUDA is set.
func OpenLibrary(path string) (*Driver, error) {
	a, err := loadLibrary(path)
	if err != nil {
		return nil, err
	}
	return open(a)
}
