package cuda

import (
	"context"
	"os"
	"strings"
)

// Inventory lists the GPUs this process can use. The load pre-flight
// (devicecopy.Preflight) depends on this interface so that tests can fake
// the hardware. Devices reports a device it cannot describe in that
// DeviceInfo's Err, and returns an error only when it cannot list at all.
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
	// Release is the driver release, e.g. "580.65.06"; "" if unknown.
	// ReleaseSource says where it was read.
	Release       string
	ReleaseSource ReleaseSource
	// Library is the driver library file loaded, symlinks resolved
	// ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06"); "" if unknown.
	Library string
	// KernelModule reports that an NVIDIA kernel module is loaded
	// (/proc/driver/nvidia/version exists). Without one the driver
	// library loads but cuInit finds no GPU (CUDA_ERROR_NO_DEVICE): a
	// machine without a GPU, or a container started without GPUs.
	KernelModule bool
}

// ReleaseSource says where DriverInfo.Release was read.
type ReleaseSource string

// Where a driver release comes from, most authoritative first. System.Driver
// tries them in this order.
const (
	// ReleaseKernelModule: /proc/driver/nvidia/version, the loaded kernel
	// module's own report.
	ReleaseKernelModule ReleaseSource = "kernel_module"
	// ReleaseNVML: nvmlSystemGetDriverVersion of libnvidia-ml.so.1, which
	// answers only while a kernel module is loaded (it helps where /proc
	// does not show the module, as in some sandboxes).
	ReleaseNVML ReleaseSource = "nvml"
	// ReleaseLibraryFile: the file name of the loaded driver library,
	// libcuda.so.RELEASE, as NVIDIA's installer, distribution packages and
	// the container toolkit name it: the user-space library's release,
	// which can differ from a kernel module's (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH).
	ReleaseLibraryFile ReleaseSource = "library_file"
)

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
// cuInit fails (no GPU visible, no kernel module, mismatched kernel
// module) still reports what it can, with the error. The release comes
// from the kernel module, else NVML (for the system's driver only, not a
// Library), else the library's file name: see ReleaseSource.
func (s System) Driver(ctx context.Context) (DriverInfo, error) {
	var info DriverInfo
	if text, err := os.ReadFile(nvidiaVersionFile); err == nil {
		info.KernelModule = true
		if r := ParseKernelModuleRelease(string(text)); r != "" {
			info.Release, info.ReleaseSource = r, ReleaseKernelModule
		}
	}
	a, err := s.load()
	if err != nil {
		return info, err
	}
	if err := ctx.Err(); err != nil {
		return info, err
	}
	info.Library = a.path
	if info.Release == "" && s.Library == "" {
		if r, _ := NVMLRelease(); r != "" {
			info.Release, info.ReleaseSource = r, ReleaseNVML
		}
	}
	if info.Release == "" {
		if r := LibraryFileRelease(a.path); r != "" {
			info.Release, info.ReleaseSource = r, ReleaseLibraryFile
		}
	}
	var v int32
	if a.cuDriverGetVersion(&v) == 0 {
		info.CUDAVersion = Version(v)
	}
	_, err = open(a)
	return info, err
}

// LibraryFileRelease returns the release in a driver library's file name,
// "535.261.03" for ".../libcuda.so.535.261.03", or "" when the name has
// none (libcuda.so.1 itself, or a library not named like NVIDIA's).
func LibraryFileRelease(path string) string {
	base := path[strings.LastIndexByte(path, '/')+1:]
	r, ok := strings.CutPrefix(base, "libcuda.so.")
	major, _, _ := strings.Cut(r, ".")
	if !ok || !isRelease(r) || len(major) < 3 { // NVIDIA's releases: 390.157, 535.261.03, 580.65.06
		return ""
	}
	return r
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
