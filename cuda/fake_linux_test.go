package cuda

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// The tests in this file load the fake driver of package internal/fakecuda,
// a shared library with the same symbols and C ABI as libcuda.so.1, to
// drive every bound function through purego without a GPU.

var (
	fakeOnce sync.Once
	fakeAPI  *api
	fakeErr  error
	fake     *fakecuda.Fake // its control functions
)

// fakeDriver configures the fake with devices GPUs and cuInit's result,
// and opens it (skipping t without a C compiler).
func fakeDriver(t *testing.T, devices, initResult int32) (*Driver, error) {
	t.Helper()
	f := fakecuda.Load(t)
	fakeOnce.Do(func() { fake = f; fakeAPI, fakeErr = loadLibrary(f.Path) })
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	f.Configure(devices, initResult)
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
		if r := fake.Refs(int32(i)); r != 0 {
			t.Errorf("device %d: primary context left retained %d times", i, r)
		}
		free, err := d.FreeMemory(context.Background(), i)
		if want := uint64(79-i) * gib; err != nil || free != want {
			t.Errorf("FreeMemory(%d) = %d, %v; want %d", i, free, err, want)
		}
		if r := fake.Refs(int32(i)); r != 0 {
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
	if cur := fake.Current(); cur != other {
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
