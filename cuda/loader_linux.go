package cuda

import (
	"sync"

	"github.com/ebitengine/purego"
)

var (
	loadOnce  sync.Once
	loadedAPI *api
	loadErr   error
)

// loadDriver loads libcuda.so.1 once per process, on first use.
func loadDriver() (*api, error) {
	loadOnce.Do(func() { loadedAPI, loadErr = loadLibrary(driverLibraryName) })
	return loadedAPI, loadErr
}

// loadLibrary opens the library at name and binds every symbol of api
// (optional ones only where the library has them). The
// handle is never closed: the driver stays loaded for the process's life,
// as CUDA requires.
func loadLibrary(name string) (*api, error) {
	h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, &LoadError{Library: name, Reason: err.Error(), Err: ErrNoDriver}
	}
	a := &api{}
	for _, s := range a.symbols() {
		var addr uintptr
		for _, n := range s.names {
			if addr, err = purego.Dlsym(h, n); err == nil {
				break
			}
		}
		if addr == 0 && s.optional {
			continue
		}
		if addr == 0 {
			purego.Dlclose(h)
			return nil, &LoadError{Library: name, Symbol: s.names[0], Err: ErrDriverTooOld}
		}
		purego.RegisterFunc(s.fptr, addr)
		if s.names[0] == "cuInit" {
			a.path = mappedFile(addr)
		}
	}
	return a, nil
}
