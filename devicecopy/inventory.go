package devicecopy

import (
	"context"
	"os"
	"strings"
)

// Inventory lists the GPUs this process can use. The load pre-flight
// depends on this interface so that tests can fake the hardware. Devices
// reports a device it cannot describe in that DeviceInfo's Err, and
// returns an error only when it cannot list at all.
type Inventory interface {
	Devices(ctx context.Context) ([]DeviceInfo, error)
}

// FreeMemoryReader is an Inventory that can measure a device's free memory
// on demand (a Driver, System). Pre-flight asks it only for the devices a
// plan uses, and only where Devices left FreeKnown unset.
type FreeMemoryReader interface {
	FreeMemory(ctx context.Context, ordinal int) (uint64, error)
}

// DriverInfo describes the installed driver.
type DriverInfo struct {
	CUDAVersion Version // newest CUDA version the driver supports
	Release     string  // kernel module release, e.g. "580.65.06"; "" if unknown
}

// System is the Inventory backed by the installed CUDA driver. Its zero
// value is ready to use; nothing is loaded until a method is called.
type System struct {
	// Library is the CUDA driver library to load instead of libcuda.so.1
	// (a path, as with OpenLibrary); empty for the system's driver.
	Library string
}

// open loads the library and initialises the driver.
func (s System) open() (*Driver, error) {
	if s.Library != "" {
		return OpenLibrary(s.Library)
	}
	return Open()
}

// load loads the library without initialising the driver.
func (s System) load() (*api, error) {
	if s.Library != "" {
		return loadLibrary(s.Library)
	}
	return loadDriver()
}

// Devices opens the driver and lists the visible GPUs (see
// Driver.Devices). Without a driver the error matches ErrNoDriver; with a
// driver but no visible GPU, ErrNoDevice.
func (s System) Devices(ctx context.Context) ([]DeviceInfo, error) {
	d, err := s.open()
	if err != nil {
		return nil, err
	}
	return d.Devices(ctx)
}

// FreeMemory opens the driver and measures a device's free memory (see
// Driver.FreeMemory).
func (s System) FreeMemory(ctx context.Context, ordinal int) (uint64, error) {
	d, err := s.open()
	if err != nil {
		return 0, err
	}
	return d.FreeMemory(ctx, ordinal)
}

// Driver opens the driver and describes it. A driver that loads but whose
// cuInit fails (no GPU visible, mismatched kernel module) still reports
// what it can, with the error.
func (s System) Driver(ctx context.Context) (DriverInfo, error) {
	info := DriverInfo{Release: KernelModuleRelease()}
	a, err := s.load()
	if err != nil {
		return info, err
	}
	if err := ctx.Err(); err != nil {
		return info, err
	}
	var v int32
	if a.cuDriverGetVersion(&v) == 0 {
		info.CUDAVersion = Version(v)
	}
	_, err = open(a)
	return info, err
}

// nvidiaVersionFile is where the loaded NVIDIA kernel module reports its
// release on Linux.
const nvidiaVersionFile = "/proc/driver/nvidia/version"

// KernelModuleRelease returns the loaded NVIDIA kernel module's release
// ("580.65.06"), or "" when it cannot be read.
func KernelModuleRelease() string {
	b, err := os.ReadFile(nvidiaVersionFile)
	if err != nil {
		return ""
	}
	return ParseKernelModuleRelease(string(b))
}

// ParseKernelModuleRelease extracts the release from the text of
// /proc/driver/nvidia/version, whose first line reads like
// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun Jul ..."
// or "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06
// Release Build ...". It returns "" when no release is found.
func ParseKernelModuleRelease(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	_, rest, ok := strings.Cut(line, "Kernel Module")
	if !ok {
		return ""
	}
	for _, f := range strings.Fields(rest) {
		if isRelease(f) {
			return f
		}
	}
	return ""
}

// isRelease accepts dotted decimal numbers with two or three parts.
func isRelease(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || len(p) > 6 || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}
