//go:build linux

package fakecuda_test

import (
	"testing"

	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// TestLoad: the library builds once and its control functions reach it:
// a configuration set through one binding is read back through another.
func TestLoad(t *testing.T) {
	f := fakecuda.Load(t)
	if g := fakecuda.Load(t); g != f {
		t.Fatal("Load built the library twice")
	}
	f.Configure(3, 0)
	defer f.Configure(2, 0)
	if n := f.DeviceAllocs(0) + f.HostAllocs() + f.Streams() + f.Refs(2); n != 0 {
		t.Errorf("a fresh fake holds %d resources", n)
	}
	f.FailNth(fakecuda.FailMemHostAlloc, 1, 2)
	f.Async(1)
	if f.Pending() != 0 {
		t.Error("work pending before any was queued")
	}
	f.Async(0)
}
