package devicecopy

import (
	"context"
	"os"
	"strings"
)

// Inventory lists the GPUs this process can use. The load pre-flight
// depends on this interface so that tests can fake the hardware.
type Inventory interface {
	Devices(ctx context.Context) ([]DeviceInfo, error)
}

// DriverInfo describes the installed driver.
type DriverInfo struct {
	CUDAVersion Version // newest CUDA version the driver supports
	Release     string  // kernel module release, e.g. "580.65.06"; "" if unknown
}

// System is the Inventory backed by the installed CUDA driver. Its zero
// value is ready to use; nothing is loaded until a method is called.
type System struct{}

// Devices opens the driver and lists the visible GPUs. Without a driver the
// error matches ErrNoDriver; with a driver but no visible GPU, ErrNoDevice.
func (System) Devices(ctx context.Context) ([]DeviceInfo, error) {
	d, err := Open()
	if err != nil {
		return nil, err
	}
	return d.Devices(ctx)
}

// Driver opens the driver and describes it. A driver that loads but whose
// cuInit fails (no GPU visible, mismatched kernel module) still reports
// what it can, with the error.
func (System) Driver(ctx context.Context) (DriverInfo, error) {
	info := DriverInfo{Release: KernelModuleRelease()}
	a, err := loadDriver()
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
