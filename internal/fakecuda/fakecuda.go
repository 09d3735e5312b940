package fakecuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
)

// Kinds of Fake.FailNth.
const (
	FailMemAlloc     = 0 // cuMemAlloc
	FailMemHostAlloc = 1 // cuMemHostAlloc
)

// Fake is the built library with its control functions bound.
type Fake struct {
	// Path is the shared library, to open with cuda.OpenLibrary or name
	// in CKPT_LIBCUDA.
	Path string

	Configure func(devices, initResult int32) // device count and cuInit's CUresult; clears the faults
	Refs      func(dev int32) int32           // primary-context references held on dev
	Current   func() uintptr                  // the calling thread's current context

	// Leak counters.
	DeviceAllocs func(dev int32) int32
	DeviceUsed   func(dev int32) uint64
	HostAllocs   func() int32
	Streams      func() int32
	Events       func() int32
	Modules      func() int32
	Launches     func() int32

	// Faults and modes.
	FailAlloc  func(dev int32)               // every cuMemAlloc on dev fails (-1: none)
	FailNth    func(kind, n, code int32)     // the n-th call from now of kind fails with code
	FailCtx    func(dev, code int32)         // cuDevicePrimaryCtxRetain fails on dev
	FailAttr   func(dev, code int32)         // attribute queries fail on dev
	JIT        func(code int32)              // JIT-compiling the checksum PTX fails with code
	CC         func(dev, major, minor int32) // dev's compute capability
	JITLoads   func() int32                  // modules loaded by JIT compilation
	CubinLoads func() int32                  // modules loaded from a cubin
	MIG        func(dev, on int32)           // dev is a MIG instance
	SetFree    func(dev int32, bytes uint64)
	Async      func(on int32) // queue work on streams, as a GPU does
	Pending    func() int32   // work queued and not landed
}

var (
	once    sync.Once
	loaded  *Fake
	loadErr error
)

// Load builds the library once per test binary and binds its control
// functions. It skips t without a C compiler (fails it under
// CKPT_REQUIRE_CC=1).
func Load(t testing.TB) *Fake {
	t.Helper()
	once.Do(func() {
		lib, err := build(t, t.TempDir())
		if err != nil {
			loadErr = err
			return
		}
		h, err := purego.Dlopen(lib, purego.RTLD_NOW)
		if err != nil {
			loadErr = err
			return
		}
		f := &Fake{Path: lib}
		for name, fptr := range map[string]any{
			"fake_configure": &f.Configure, "fake_ctx_refs": &f.Refs, "fake_current": &f.Current,
			"fake_device_allocs": &f.DeviceAllocs, "fake_device_used": &f.DeviceUsed, "fake_host_allocs": &f.HostAllocs,
			"fake_streams": &f.Streams, "fake_events": &f.Events, "fake_modules": &f.Modules, "fake_launches": &f.Launches,
			"fake_fail_alloc": &f.FailAlloc, "fake_fail_nth": &f.FailNth, "fake_fail_ctx": &f.FailCtx,
			"fake_fail_attr": &f.FailAttr, "fake_jit": &f.JIT, "fake_cc": &f.CC, "fake_jit_loads": &f.JITLoads,
			"fake_cubin_loads": &f.CubinLoads, "fake_mig": &f.MIG, "fake_set_free": &f.SetFree,
			"fake_async": &f.Async, "fake_pending": &f.Pending,
		} {
			purego.RegisterLibFunc(fptr, h, name)
		}
		loaded = f
	})
	if loadErr != nil {
		unavailable(t, loadErr)
	}
	return loaded
}

// Build compiles the library into dir with extra compiler arguments (such
// as -D macros selecting a variant) and returns its path. It skips t
// without a C compiler (fails it under CKPT_REQUIRE_CC=1).
func Build(t testing.TB, dir string, args ...string) string {
	t.Helper()
	lib, err := build(t, dir, args...)
	if err != nil {
		unavailable(t, err)
	}
	return lib
}

// build compiles the library, failing t when the compiler rejects the
// source; the error is a missing compiler.
func build(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libfakecuda.so")
	cmd := append([]string{"-shared", "-fPIC", "-o", lib}, args...)
	out, err := exec.Command(cc, append(cmd, source())...).CombinedOutput()
	if err != nil {
		t.Fatalf("building the fake CUDA driver: %v\n%s", err, out)
	}
	return lib, nil
}

// source is testdata/fakecuda.c beside this file: it includes the kernel
// source by a path relative to itself, so it is compiled where it is.
func source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "fakecuda.c")
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CKPT_REQUIRE_CC") == "1" {
		t.Fatalf("fake CUDA driver unavailable and CKPT_REQUIRE_CC=1: %v", err)
	}
	t.Skipf("fake CUDA driver unavailable (needs a C compiler): %v", err)
}
