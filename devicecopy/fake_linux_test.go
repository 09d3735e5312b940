package devicecopy

import (
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// fake holds the control functions of the fake libcuda of package
// internal/fakecuda, which the tests of this package upload through.
var fake *fakecuda.Fake

// fakeDriver configures the fake with devices GPUs and cuInit's result,
// and opens it (skipping t without a C compiler).
func fakeDriver(t *testing.T, devices, initResult int32) (*cuda.Driver, error) {
	t.Helper()
	fake = fakecuda.Load(t)
	fake.Configure(devices, initResult)
	return cuda.OpenLibrary(fake.Path)
}
