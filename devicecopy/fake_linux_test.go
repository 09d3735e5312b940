package devicecopy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The tests in this file load testdata/fakecuda.c, built here into a shared
// library with the same symbols and C ABI as libcuda.so.1, to drive every
// bound function through purego without a GPU.

var (
	fakeOnce sync.Once
	fakeAPI  *api
	fakeErr  error
	fakeHook struct {
		configure func(devices, initResult int32)
		refs      func(dev int32) int32
		current   func() uintptr
		// Leak counters and fault injection (see testdata/fakecuda.c).
		deviceAllocs func(dev int32) int32
		deviceUsed   func(dev int32) uint64
		hostAllocs   func() int32
		streams      func() int32
		events       func() int32
		modules      func() int32
		launches     func() int32
		failAlloc    func(dev int32)
		// Faults and modes (see the comment at the top of fakecuda.c).
		failNth  func(kind, n, code int32)
		failCtx  func(dev, code int32)
		failAttr func(dev, code int32)
		jit      func(code int32)
		cc       func(dev, major, minor int32)
		jitLoads func() int32
		cubins   func() int32
		mig      func(dev, on int32)
		setFree  func(dev int32, bytes uint64)
		async    func(on int32)
		pending  func() int32
	}
)

// Kinds of fakeHook.failNth.
const (
	failMemAlloc     = 0
	failMemHostAlloc = 1
)

// buildFake compiles testdata/fakecuda.c into a shared library in dir with
// the given extra compiler arguments (such as -D macros).
func buildFake(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", err
	}
	lib := filepath.Join(dir, "libfakecuda.so")
	cmd := append([]string{"-shared", "-fPIC", "-o", lib}, args...)
	out, err := exec.Command(cc, append(cmd, "testdata/fakecuda.c")...).CombinedOutput()
	if err != nil {
		t.Fatalf("building fake driver: %v\n%s", err, out)
	}
	return lib, nil
}

func fakeDriver(t *testing.T, devices, initResult int32) (*Driver, error) {
	t.Helper()
	fakeOnce.Do(func() {
		lib, err := buildFake(t, t.TempDir())
		if err != nil {
			fakeErr = err
			return
		}
		if fakeAPI, fakeErr = loadLibrary(lib); fakeErr != nil {
			return
		}
		h, err := purego.Dlopen(lib, purego.RTLD_NOW)
		if err != nil {
			fakeErr = err
			return
		}
		purego.RegisterLibFunc(&fakeHook.configure, h, "fake_configure")
		purego.RegisterLibFunc(&fakeHook.refs, h, "fake_ctx_refs")
		purego.RegisterLibFunc(&fakeHook.current, h, "fake_current")
		purego.RegisterLibFunc(&fakeHook.deviceAllocs, h, "fake_device_allocs")
		purego.RegisterLibFunc(&fakeHook.deviceUsed, h, "fake_device_used")
		purego.RegisterLibFunc(&fakeHook.hostAllocs, h, "fake_host_allocs")
		purego.RegisterLibFunc(&fakeHook.streams, h, "fake_streams")
		purego.RegisterLibFunc(&fakeHook.events, h, "fake_events")
		purego.RegisterLibFunc(&fakeHook.modules, h, "fake_modules")
		purego.RegisterLibFunc(&fakeHook.launches, h, "fake_launches")
		purego.RegisterLibFunc(&fakeHook.failAlloc, h, "fake_fail_alloc")
		purego.RegisterLibFunc(&fakeHook.failNth, h, "fake_fail_nth")
		purego.RegisterLibFunc(&fakeHook.failCtx, h, "fake_fail_ctx")
		purego.RegisterLibFunc(&fakeHook.failAttr, h, "fake_fail_attr")
		purego.RegisterLibFunc(&fakeHook.jit, h, "fake_jit")
		purego.RegisterLibFunc(&fakeHook.cc, h, "fake_cc")
		purego.RegisterLibFunc(&fakeHook.jitLoads, h, "fake_jit_loads")
		purego.RegisterLibFunc(&fakeHook.cubins, h, "fake_cubin_loads")
		purego.RegisterLibFunc(&fakeHook.mig, h, "fake_mig")
		purego.RegisterLibFunc(&fakeHook.setFree, h, "fake_set_free")
		purego.RegisterLibFunc(&fakeHook.async, h, "fake_async")
		purego.RegisterLibFunc(&fakeHook.pending, h, "fake_pending")
	})
	if fakeErr != nil {
		if os.Getenv("CKPT_REQUIRE_CC") == "1" {
			t.Fatalf("fake driver unavailable and CKPT_REQUIRE_CC=1: %v", fakeErr)
		}
		t.Skipf("fake driver unavailable (needs a C compiler): %v", fakeErr)
	}
	fakeHook.configure(devices, initResult)
	return open(fakeAPI)
}

func TestFakeDevices(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Version().String() != "13.0" {
		t.Errorf("Version = %v", d.Version())
	}
	devs, err := d.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	const gib = 1 << 30
	want := []DeviceInfo{
		{Ordinal: 0, Name: "Fake GPU 0", UUID: "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", ComputeCapability: [2]int{9, 0},
			TotalMemory: 80 * gib, PCIBusID: "0000:65:1f.0"},
		{Ordinal: 1, Name: "Fake GPU 1", UUID: "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", ComputeCapability: [2]int{9, 1},
			TotalMemory: 80 * gib, PCIBusID: "0010:66:1f.0"},
	}
	if len(devs) != len(want) {
		t.Fatalf("got %d devices", len(devs))
	}
	for i := range want {
		if devs[i] != want[i] {
			t.Errorf("device %d:\n got %+v\nwant %+v", i, devs[i], want[i])
		}
		if r := fakeHook.refs(int32(i)); r != 0 {
			t.Errorf("device %d: primary context left retained %d times", i, r)
		}
		free, err := d.FreeMemory(context.Background(), i)
		if want := uint64(79-i) * gib; err != nil || free != want {
			t.Errorf("FreeMemory(%d) = %d, %v; want %d", i, free, err, want)
		}
		if r := fakeHook.refs(int32(i)); r != 0 {
			t.Errorf("device %d: FreeMemory left the context retained %d times", i, r)
		}
	}
	if _, err := d.Device(2); !errors.Is(err, ErrInvalidDevice) {
		t.Errorf("Device(2): %v", err)
	}
	var ce *CUDAError
	if _, err := d.Device(2); !errors.As(err, &ce) || ce.Op != "cuDeviceGet" || ce.Name != "CUDA_ERROR_INVALID_DEVICE" {
		t.Errorf("Device(2) error: %+v", ce)
	}
	if _, err := d.Device(-1); !errors.Is(err, ErrInvalidDevice) {
		t.Errorf("Device(-1): %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Devices(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Devices: %v", err)
	}
}

func TestFakeInitFailures(t *testing.T) {
	_, err := fakeDriver(t, 0, 0)
	var ce *CUDAError
	if !errors.Is(err, ErrNoDevice) || !errors.As(err, &ce) || ce.Op != "cuInit" || ce.Hint == "" {
		t.Errorf("no devices: %v", err)
	}
	// A code the fake's cuGetErrorName does not know: our table names it.
	if _, err = fakeDriver(t, 2, 803); !errors.Is(err, ErrDriverMismatch) || !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" {
		t.Errorf("mismatch: %v", err)
	}
	// A code only the driver knows: its name and string are used.
	if _, err = fakeDriver(t, 2, 4242); !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_FROM_THE_FUTURE" || ce.Meaning != "a future error" {
		t.Errorf("future code: %+v", ce)
	}
}

func TestFakeContextRestored(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	other := uintptr(0x77)
	d.api.cuCtxSetCurrent(other)
	defer d.api.cuCtxSetCurrent(0)
	c, err := d.PrimaryContext(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.MemGetInfo(); err != nil {
		t.Fatal(err)
	}
	if cur := fakeHook.current(); cur != other {
		t.Errorf("current context %#x after call, want %#x restored", cur, other)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(); !errors.Is(err, ErrNoDriver) {
		t.Errorf("second Release: %v", err)
	}
}

func TestFakeMemoryAndLaunch(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.PrimaryContext(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const n = 1000
	host, err := c.MemHostAlloc(n, HostAllocPortable)
	must(err)
	for i := range host {
		host[i] = byte(i)
	}
	dev, err := c.MemAlloc(n)
	must(err)
	s, err := c.NewStream(StreamNonBlocking)
	must(err)
	start, err := c.NewEvent(0)
	must(err)
	must(c.RecordEvent(start, s))
	must(c.MemcpyHtoDAsync(dev, host, s))
	must(c.SynchronizeStream(s))

	mod, err := c.LoadModule([]byte("// fake ptx\n"))
	must(err)
	f, err := c.Function(mod, "add")
	must(err)
	ptr, count, add := uint64(dev), uint32(n-10), uint8(3)
	must(c.Launch(f, [3]uint32{2, 3, 4}, [3]uint32{32, 1, 1}, 128, s,
		unsafe.Pointer(&ptr), unsafe.Pointer(&count), unsafe.Pointer(&add)))
	must(c.RecordEvent(start, s))
	must(c.SynchronizeEvent(start))
	ms, err := c.ElapsedMillis(start, start)
	must(err)
	if ms != 2.5 { // cuEventElapsedTime_v2, preferred over the legacy name
		t.Errorf("ElapsedMillis = %v", ms)
	}
	back := make([]byte, n)
	must(c.MemcpyDtoH(back, dev))
	want := bytes.Clone(host)
	for i := range n - 10 {
		want[i] += 3
	}
	if !bytes.Equal(back, want) {
		t.Error("kernel result differs")
	}
	must(c.MemsetD8(dev, 0xab, n))
	must(c.MemcpyDtoH(back, dev))
	if !bytes.Equal(back, bytes.Repeat([]byte{0xab}, n)) {
		t.Error("MemsetD8 result differs")
	}
	reg := make([]byte, 64)
	must(c.MemHostRegister(reg, HostRegisterPortable))
	must(c.MemHostUnregister(reg))
	must(c.Synchronize())

	if _, err := c.Function(mod, "missing"); err == nil {
		t.Error("missing kernel found")
	}
	var ce *CUDAError
	if _, err := c.LoadModule([]byte("garbage")); !errors.Is(err, ErrBadKernel) || !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_INVALID_PTX" {
		t.Errorf("bad PTX: %v", err)
	}
	if _, err := c.MemAlloc(2 << 30); !errors.Is(err, ErrOutOfMemory) || !errors.As(err, &ce) || ce.Op != "cuMemAlloc_v2" {
		t.Errorf("OOM: %v", err)
	}
	must(c.UnloadModule(mod))
	must(c.DestroyEvent(start))
	must(c.DestroyStream(s))
	must(c.MemFree(dev))
	must(c.MemFreeHost(host))
	if _, err := c.MemHostAlloc(0, 0); err == nil {
		t.Error("MemHostAlloc(0) succeeded")
	}
}

func TestLoadLibraryFailures(t *testing.T) {
	_, err := loadLibrary("/nonexistent/libcuda.so.1")
	var le *LoadError
	if !errors.Is(err, ErrNoDriver) || !errors.As(err, &le) || !strings.Contains(le.Reason, "/nonexistent/libcuda.so.1") {
		t.Errorf("missing library: %v", err)
	}
	// libc loads but is no CUDA driver: the first symbol is missing.
	_, err = loadLibrary("libc.so.6")
	if !errors.Is(err, ErrDriverTooOld) || !errors.As(err, &le) || le.Symbol != "cuInit" {
		t.Errorf("library without CUDA symbols: %v", err)
	}
}
