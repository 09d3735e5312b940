//go:build linux

package fakecuda

import (
	"errors"
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
	once     sync.Once
	loaded   *Fake
	loadErr  error
	buildErr error // the compiler refused the source: a failure, not a skip
)

// Load builds the library once per test binary and binds its control
// functions. It skips t without a C compiler (fails it under
// CKPT_REQUIRE_CC=1).
func Load(t testing.TB) *Fake {
	t.Helper()
	once.Do(func() {
		lib, err := build(t.TempDir())
		if err != nil {
			loadErr = err
			if errors.As(err, new(*compileError)) {
				buildErr = err
			}
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
	if buildErr != nil {
		t.Fatalf("building the fake CUDA driver: %v", buildErr)
	}
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
	lib, err := build(dir, args...)
	if errors.As(err, new(*compileError)) {
		t.Fatalf("building the fake CUDA driver: %v", err)
	}
	if err != nil {
		unavailable(t, err)
	}
	return lib
}

// compileError: the compiler refused the source.
type compileError struct {
	err error
	out []byte
}

func (e *compileError) Error() string { return e.err.Error() + "\n" + string(e.out) }

// build compiles the library. A *compileError means the compiler refused
// the source, a failure;
// any other error means no compiler or no source, a skip. It never calls
// t.Fatal: Load runs it inside a sync.Once, where a Goexit would leave
// every later test a nil Fake.
func build(dir string, args ...string) (string, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", err
	}
	src, err := source()
	if err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libfakecuda.so")
	cmd := append([]string{"-shared", "-fPIC", "-o", lib}, args...)
	out, err := exec.Command(cc, append(cmd, src)...).CombinedOutput()
	if err != nil {
		return "", &compileError{err, out}
	}
	return lib, nil
}

// source is testdata/fakecuda.c beside this file: it includes the kernel
// source by a path relative to itself, so it is compiled where it is. A
// test binary built with -trimpath (make gpu-bundle) knows this file only
// as an import path; it then finds the module root above its working
// directory (a test binary runs in its package's directory).
func source() (string, error) {
	const rel = "internal/fakecuda/testdata/fakecuda.c"
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "testdata", "fakecuda.c"), nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, rel)
			_, err := os.Stat(p)
			return p, err
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory, so no " + rel)
		}
		dir = up
	}
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CKPT_REQUIRE_CC") == "1" {
		t.Fatalf("fake CUDA driver unavailable and CKPT_REQUIRE_CC=1: %v", err)
	}
	t.Skipf("fake CUDA driver unavailable (needs a C compiler): %v", err)
}
