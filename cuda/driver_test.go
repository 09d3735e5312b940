package cuda

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestOpenOnThisMachine runs the real binding. Without an NVIDIA driver it
// must fail cleanly with ErrNoDriver; with one it must list devices.
func TestOpenOnThisMachine(t *testing.T) {
	d, err := Open()
	if err != nil {
		var le *LoadError
		var ce *CUDAError
		switch {
		case errors.As(err, &le) && errors.Is(err, ErrNoDriver):
			if !strings.Contains(err.Error(), "no NVIDIA driver is installed") {
				t.Errorf("message does not say no driver: %v", err)
			}
			t.Logf("no driver: %v", err)
		case errors.As(err, &ce):
			t.Logf("driver present, cuInit failed: %v", err)
		default:
			t.Fatalf("Open: untyped error %T: %v", err, err)
		}
		if _, derr := (System{}).Devices(context.Background()); derr == nil || derr.Error() != err.Error() {
			t.Errorf("System.Devices = %v, want %v", derr, err)
		}
		return
	}
	devs, err := d.Devices(context.Background())
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	t.Logf("CUDA %v, %d devices: %+v", d.Version(), len(devs), devs)
	for i, dev := range devs {
		if dev.Ordinal != i || dev.Name == "" || !strings.HasPrefix(dev.UUID, "GPU-") || dev.TotalMemory == 0 ||
			dev.FreeMemory > dev.TotalMemory || len(dev.PCIBusID) != 12 {
			t.Errorf("implausible device %+v", dev)
		}
	}
}

// TestUnusableHandles: every method of a nil or zero Driver or Context
// returns ErrNoDriver instead of crashing.
func TestUnusableHandles(t *testing.T) {
	var nilDriver *Driver
	for _, d := range []*Driver{nilDriver, {}} {
		if d.Version() != 0 {
			t.Error("Version of unusable driver")
		}
		if _, err := d.DeviceCount(); !errors.Is(err, ErrNoDriver) {
			t.Errorf("DeviceCount: %v", err)
		}
		if _, err := d.Devices(context.Background()); !errors.Is(err, ErrNoDriver) {
			t.Errorf("Devices: %v", err)
		}
		if _, err := d.Device(0); !errors.Is(err, ErrNoDriver) {
			t.Errorf("Device: %v", err)
		}
		if _, err := d.PrimaryContext(0); !errors.Is(err, ErrNoDriver) {
			t.Errorf("PrimaryContext: %v", err)
		}
	}
	var nilCtx *Context
	for _, c := range []*Context{nilCtx, {}, {d: &Driver{}, handle: 1}} {
		buf := make([]byte, 4)
		checks := map[string]error{
			"Release":     c.Release(),
			"Synchronize": c.Synchronize(),
			"MemFree":     c.MemFree(1),
			"MemsetD8":    c.MemsetD8(1, 0, 1),
			"MemFreeHost": c.MemFreeHost(buf),
			"Register":    c.MemHostRegister(buf, 0),
			"Unregister":  c.MemHostUnregister(buf),
			"HtoD":        c.MemcpyHtoDAsync(1, buf, 0),
			"DtoH":        c.MemcpyDtoH(buf, 1),
			"DestroyS":    c.DestroyStream(1),
			"SyncS":       c.SynchronizeStream(1),
			"DestroyE":    c.DestroyEvent(1),
			"Record":      c.RecordEvent(1, 0),
			"SyncE":       c.SynchronizeEvent(1),
			"Unload":      c.UnloadModule(1),
			"Launch":      c.Launch(1, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0),
		}
		_, _, checks["MemGetInfo"] = c.MemGetInfo()
		_, checks["MemAlloc"] = c.MemAlloc(1)
		_, checks["MemHostAlloc"] = c.MemHostAlloc(1, 0)
		_, checks["NewStream"] = c.NewStream(0)
		_, checks["NewEvent"] = c.NewEvent(0)
		_, checks["Elapsed"] = c.ElapsedMillis(1, 2)
		_, checks["LoadModule"] = c.LoadModule([]byte("x"))
		_, checks["Function"] = c.Function(1, "f")
		for name, err := range checks {
			if !errors.Is(err, ErrNoDriver) {
				t.Errorf("%s on unusable context: %v", name, err)
			}
		}
	}
}

func TestCUDAErrorTable(t *testing.T) {
	for _, c := range []struct {
		code     int
		name     string
		sentinel error
	}{
		{100, "CUDA_ERROR_NO_DEVICE", ErrNoDevice},
		{101, "CUDA_ERROR_INVALID_DEVICE", ErrInvalidDevice},
		{2, "CUDA_ERROR_OUT_OF_MEMORY", ErrOutOfMemory},
		{3, "CUDA_ERROR_NOT_INITIALIZED", ErrNotInitialized},
		{36, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", ErrInsufficientDriver},
		{221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", ErrBadKernel},
		{223, "CUDA_ERROR_JIT_COMPILATION_DISABLED", ErrBadKernel},
		{804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", ErrDriverMismatch},
		{803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", ErrDriverMismatch},
		{222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", ErrBadKernel},
		{218, "CUDA_ERROR_INVALID_PTX", ErrBadKernel},
		{34, "CUDA_ERROR_STUB_LIBRARY", ErrNoDriver},
	} {
		e := newCUDAError("cuOp", c.code, "", "")
		if e.Name != c.name || e.Meaning == "" || e.Hint == "" || e.Op != "cuOp" || e.Code != c.code {
			t.Errorf("code %d: %+v", c.code, e)
		}
		var err error = e
		if !errors.Is(err, c.sentinel) {
			t.Errorf("code %d does not match %v", c.code, c.sentinel)
		}
		if errors.Is(err, errUnrelated) {
			t.Errorf("code %d matches an unrelated sentinel", c.code)
		}
		if !strings.Contains(e.Error(), c.name) || !strings.Contains(e.Error(), "cuOp") {
			t.Errorf("message %q lacks name or op", e.Error())
		}
	}
	e := newCUDAError("cuX", 12345, "", "")
	if e.Name != "CUresult(12345)" || e.Meaning == "" || errors.Is(e, ErrNoDevice) {
		t.Errorf("unknown code: %+v", e)
	}
	e = newCUDAError("cuX", 12345, "CUDA_ERROR_NEW", "something new")
	if e.Name != "CUDA_ERROR_NEW" || e.Meaning != "something new" {
		t.Errorf("driver-named code: %+v", e)
	}
}

// cudaH13 is the CUresult enum of CUDA 13's cuda.h, for the codes ckpt's
// table explains.
var cudaH13 = map[string]int{
	"CUDA_ERROR_INVALID_VALUE": 1, "CUDA_ERROR_OUT_OF_MEMORY": 2, "CUDA_ERROR_NOT_INITIALIZED": 3,
	"CUDA_ERROR_DEINITIALIZED": 4, "CUDA_ERROR_STUB_LIBRARY": 34, "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER": 36,
	"CUDA_ERROR_DEVICE_UNAVAILABLE": 46, "CUDA_ERROR_NO_DEVICE": 100, "CUDA_ERROR_INVALID_DEVICE": 101,
	"CUDA_ERROR_INVALID_IMAGE": 200, "CUDA_ERROR_INVALID_CONTEXT": 201, "CUDA_ERROR_NO_BINARY_FOR_GPU": 209,
	"CUDA_ERROR_INVALID_PTX": 218, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND": 221, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": 222,
	"CUDA_ERROR_JIT_COMPILATION_DISABLED": 223, "CUDA_ERROR_INVALID_HANDLE": 400, "CUDA_ERROR_NOT_FOUND": 500,
	"CUDA_ERROR_NOT_READY": 600, "CUDA_ERROR_ILLEGAL_ADDRESS": 700, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": 701,
	"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED": 712, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED": 713,
	"CUDA_ERROR_LAUNCH_FAILED": 719, "CUDA_ERROR_NOT_PERMITTED": 800, "CUDA_ERROR_NOT_SUPPORTED": 801,
	"CUDA_ERROR_SYSTEM_NOT_READY": 802, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": 803,
	"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": 804, "CUDA_ERROR_UNKNOWN": 999,
}

// TestCUDAErrorTableMatchesHeader checks every entry of the table against
// cuda.h's numbering: a name at the wrong number (35 is no driver code)
// would explain an error the driver never returns as something else.
func TestCUDAErrorTableMatchesHeader(t *testing.T) {
	for code, info := range cudaCodes() {
		if want, ok := cudaH13[info.name]; !ok || want != code {
			t.Errorf("table: %d is %s; cuda.h: %s is %d (known: %v)", code, info.name, info.name, want, ok)
		}
	}
}

// errUnrelated is a sentinel no CUDA code may match.
var errUnrelated = errors.New("unrelated")

func TestVersion(t *testing.T) {
	for v, want := range map[Version]string{13000: "13.0", 12080: "12.8", 11040: "11.4", 12090: "12.9", 0: "0.0"} {
		if v.String() != want {
			t.Errorf("%d -> %s, want %s", int(v), v, want)
		}
	}
}

func TestFormat(t *testing.T) {
	u := [16]byte{0x89, 0x32, 0xf9, 0x37, 0xd7, 0x2c, 0x41, 0x06, 0xc1, 0x2f, 0x20, 0xbd, 0x9f, 0xae, 0xd9, 0xf6}
	if got := FormatUUID(u); got != "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6" {
		t.Errorf("FormatUUID = %s", got)
	}
	if got := FormatPCIBusID(0, 0x65, 0); got != "0000:65:00.0" {
		t.Errorf("FormatPCIBusID = %s", got)
	}
	if got := FormatPCIBusID(0x10, 0xb, 0x1f); got != "0010:0b:1f.0" {
		t.Errorf("FormatPCIBusID = %s", got)
	}
}

func TestParseKernelModuleRelease(t *testing.T) {
	for text, want := range map[string]string{
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc version 12.2.0\n": "535.104.05",
		"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16)  Sun Jul 27 2025\n":      "580.65.06",
		"NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54\n":                                                                    "550.54",
		"": "",
		"GCC version: 12.2.0\nNVRM version: NVIDIA UNIX x86_64 Kernel Module 1.2.3": "",
		"NVRM version: NVIDIA UNIX x86_64 Kernel Module  for x86_64":                "",
	} {
		if got := ParseKernelModuleRelease(text); got != want {
			t.Errorf("ParseKernelModuleRelease(%q) = %q, want %q", text, got, want)
		}
	}
}

func FuzzParseKernelModuleRelease(f *testing.F) {
	f.Add("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
	f.Add("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n")
	f.Fuzz(func(t *testing.T, s string) {
		if r := ParseKernelModuleRelease(s); r != "" && !isRelease(r) {
			t.Fatalf("%q -> %q", s, r)
		}
	})
}
