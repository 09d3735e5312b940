package cuda

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// The tests in this file run against NVIDIA's own driver library where it
// is installed (Debian's non-free libcuda1 installs without a GPU: see
// docs/gpu.md). Without it they skip, unless CKPT_REQUIRE_REAL_LIBCUDA=1
// (CI) makes that a failure.

// realLibrary loads the system's libcuda.so.1 with the package's own
// loader (every required symbol bound) and returns it with its dlopen
// handle.
func realLibrary(t *testing.T) (*api, uintptr) {
	t.Helper()
	a, err := loadLibrary(driverLibraryName)
	if err != nil {
		if os.Getenv("CKPT_REQUIRE_REAL_LIBCUDA") == "1" {
			t.Fatalf("NVIDIA's libcuda.so.1 is required (CKPT_REQUIRE_REAL_LIBCUDA=1): %v", err)
		}
		t.Skipf("no NVIDIA libcuda.so.1 (apt-get install libcuda1 from Debian non-free: docs/gpu.md; CKPT_REQUIRE_REAL_LIBCUDA=1 makes this a failure): %v", err)
	}
	h, err := purego.Dlopen(driverLibraryName, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("driver library %s", a.path)
	return a, h
}

// kernelModuleLoaded reports whether an NVIDIA kernel module is loaded:
// without one, cuInit must fail with CUDA_ERROR_NO_DEVICE.
func kernelModuleLoaded() bool {
	_, err := os.Stat(nvidiaVersionFile)
	return err == nil
}

// realVersion reads cuDriverGetVersion of a (which needs no cuInit).
func realVersion(t *testing.T, a *api) Version {
	t.Helper()
	var v int32
	if r := a.cuDriverGetVersion(&v); r != 0 {
		t.Fatalf("cuDriverGetVersion = %d", r)
	}
	return Version(v)
}

// TestRealDriverSymbols: every symbol this package binds exists in
// NVIDIA's library under the versioned name it expects, and is the very
// function the driver's own cuGetProcAddress gives for the API name at
// the driver's CUDA version (so no legacy ABI is bound by mistake).
// Optional symbols the library lacks are reported, and the package's
// fallback is what it bound.
func TestRealDriverSymbols(t *testing.T) {
	a, h := realLibrary(t)
	ver := realVersion(t, a)
	var getProc func(sym *byte, p *uintptr, cudaVersion int32, flags uint64) cuResult
	purego.RegisterLibFunc(&getProc, h, "cuGetProcAddress") // CUDA 11.3+; the 4-argument form
	var v2UUID uintptr
	for _, s := range a.symbols() {
		var name string
		var addr uintptr
		for _, n := range s.names {
			if p, err := purego.Dlsym(h, n); err == nil {
				name, addr = n, p
				break
			}
			if !s.optional || n != s.names[len(s.names)-1] {
				t.Logf("%s: not in this library", n)
			}
		}
		switch {
		case addr == 0 && s.optional:
			t.Logf("optional %v: none in this library; the package leaves it unbound", s.names)
			continue
		case addr == 0:
			t.Errorf("%v: none in NVIDIA's library", s.names)
			continue
		case name != s.names[0] && !s.optional:
			t.Errorf("required symbol %s is missing; the package would bind %s", s.names[0], name)
		case name != s.names[0]:
			t.Logf("optional %s is missing (newer drivers have it); the package binds %s", s.names[0], name)
		}
		if name == "cuDeviceGetUuid_v2" {
			v2UUID = addr
		}
		if name == "cuDeviceGetUuid" && s.optional {
			// Bound on purpose as the legacy entry (a MIG instance's
			// parent UUID): it must be a function of its own.
			if addr == v2UUID || v2UUID == 0 {
				t.Errorf("legacy cuDeviceGetUuid %#x is not distinct from cuDeviceGetUuid_v2 %#x", addr, v2UUID)
			}
			continue
		}
		api := name
		if i := strings.LastIndex(name, "_v"); i > 0 {
			if _, err := strconv.Atoi(name[i+2:]); err == nil {
				api = name[:i]
			}
		}
		cname := append([]byte(api), 0)
		var p uintptr
		if r := getProc(&cname[0], &p, int32(ver), 0); r != 0 || p != addr {
			t.Errorf("cuGetProcAddress(%q, CUDA %v) = %#x (CUresult %d), but the package binds %s = %#x", api, ver, p, r, name, addr)
		}
	}
	if a.cuEventElapsedTime == nil {
		t.Error("neither cuEventElapsedTime_v2 nor cuEventElapsedTime bound: GPU timing would be unavailable")
	}
}

// TestRealDriverVersion: cuDriverGetVersion works without a GPU; the
// CUDA version matches the driver release (535 is CUDA 12.2: 12020).
func TestRealDriverVersion(t *testing.T) {
	a, _ := realLibrary(t)
	ver := realVersion(t, a)
	release := LibraryFileRelease(a.path)
	t.Logf("cuDriverGetVersion = %d (CUDA %v), library release %q", int(ver), ver, release)
	if ver.Major() < 11 {
		t.Errorf("CUDA %v: implausible for a driver ckpt supports", ver)
	}
	// The CUDA version of each driver branch NVIDIA documents (release notes).
	for branch, want := range map[string]Version{"525.": 12000, "530.": 12010, "535.": 12020, "545.": 12030, "550.": 12040, "555.": 12050,
		"560.": 12060, "565.": 12070, "570.": 12080, "575.": 12090, "580.": 13000} {
		if strings.HasPrefix(release, branch) && ver != want {
			t.Errorf("driver %s reports CUDA %d, NVIDIA's release notes say %d", release, int(ver), int(want))
		}
	}
}

// TestRealNoDevice: on a machine with the library but no kernel module,
// Open fails with CUDA_ERROR_NO_DEVICE as a typed, plain-words error
// (the driver's own cuGetErrorName agreeing), and the inventory and the
// driver description say the same.
func TestRealNoDevice(t *testing.T) {
	a, _ := realLibrary(t)
	if kernelModuleLoaded() {
		t.Skip("an NVIDIA kernel module is loaded: cuInit can succeed here")
	}
	_, err := open(a)
	var ce *CUDAError
	if !errors.As(err, &ce) || ce.Code != 100 || ce.Name != "CUDA_ERROR_NO_DEVICE" || ce.Op != "cuInit" || !errors.Is(err, ErrNoDevice) {
		t.Fatalf("cuInit: %v", err)
	}
	want := "cuda: cuInit failed: the driver found no CUDA-capable GPU (CUDA_ERROR_NO_DEVICE, code 100): " +
		"check that a GPU is installed and that CUDA_VISIBLE_DEVICES does not hide every GPU (an empty value hides all)"
	if err.Error() != want {
		t.Errorf("message\n got %s\nwant %s", err, want)
	}
	// cuInit fails the same way each time (nothing cached half-open).
	if _, err2 := open(a); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("second Open: %v", err2)
	}
	if _, err := (System{}).Devices(context.Background()); !errors.Is(err, ErrNoDevice) {
		t.Errorf("System.Devices: %v", err)
	}
	info, err := (System{}).Driver(context.Background())
	if !errors.Is(err, ErrNoDevice) || info.CUDAVersion != realVersion(t, a) || info.Library != a.path || info.KernelModule {
		t.Errorf("System.Driver: %+v, %v", info, err)
	}
}

// TestRealErrorNames: the names this package gives CUresult codes are the
// driver's own (cuGetErrorName, which needs no cuInit); codes this driver
// does not know yet are reported.
func TestRealErrorNames(t *testing.T) {
	a, _ := realLibrary(t)
	for code, info := range cudaCodes() {
		var p *byte
		if r := a.cuGetErrorName(cuResult(code), &p); r != 0 {
			t.Logf("code %d (%s): unknown to this driver (cuGetErrorName = %d)", code, info.name, r)
			continue
		}
		if got := cString(p); got != info.name {
			t.Errorf("code %d: the package says %s, the driver %s", code, info.name, got)
		}
	}
}

// TestRealDriverRelease: the release is read from the kernel module, else
// NVML, else the library's file name; without a kernel module NVML fails
// (and says why) and the file name gives the release.
func TestRealDriverRelease(t *testing.T) {
	a, _ := realLibrary(t)
	info, _ := (System{}).Driver(context.Background())
	nvml, why := NVMLRelease()
	t.Logf("release %q from %q; NVML: %q %s", info.Release, info.ReleaseSource, nvml, why)
	if kernelModuleLoaded() {
		if info.ReleaseSource != ReleaseKernelModule || info.Release != KernelModuleRelease() {
			t.Errorf("with a kernel module: %+v", info)
		}
		return
	}
	if nvml != "" || why == "" {
		t.Errorf("NVML without a kernel module: %q, %q", nvml, why)
	}
	if lib := LibraryFileRelease(a.path); lib == "" || info.Release != lib || info.ReleaseSource != ReleaseLibraryFile {
		t.Errorf("release %+v; library file %s", info, a.path)
	}
}

// TestRealNoLeak: asking the real driver again and again (Open, Driver,
// Devices, the pre-flight) leaks no file descriptors, goroutines or OS
// threads and does not panic.
func TestRealNoLeak(t *testing.T) {
	realLibrary(t)
	ctx := context.Background()
	round := func() {
		_, _ = Open()
		_, _ = (System{}).Driver(ctx)
		_, _ = (System{}).Devices(ctx)
		_, _ = (System{}).FreeMemory(ctx, 0)
		queryNVML(nvmlLibraryName) // uncached: nvmlInit_v2 each round
	}
	round() // first use loads the libraries and starts whatever they keep
	fds, threads, gor := openFDs(t), osThreads(t), runtime.NumGoroutine()
	for range 20 { // each round calls cuInit 4 times; a failing cuInit takes the driver about 0.04 s
		round()
	}
	if n := openFDs(t); n > fds {
		t.Errorf("open file descriptors %d -> %d", fds, n)
	}
	if n := osThreads(t); n > threads+2 { // the Go runtime may start a thread or two
		t.Errorf("OS threads %d -> %d", threads, n)
	}
	if n := runtime.NumGoroutine(); n > gor {
		t.Errorf("goroutines %d -> %d", gor, n)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

func osThreads(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// TestLibraryPath: the loader records the file it loaded, found from the
// address of a bound function (as dladdr would).
func TestLibraryPath(t *testing.T) {
	d, err := fakeDriver(t, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(d.api.path, "/libfakecuda.so") {
		t.Errorf("path %q", d.api.path)
	}
	if got := mappedFile(0); got != "" {
		t.Errorf("mappedFile(0) = %q", got)
	}
}
