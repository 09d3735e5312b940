package ckpt

import (
	"context"

	"github.com/ckpt-dev/ckpt/cuda"
)

// The GPU side of the facade: what `ckpt devices` reports, and what a load
// needs to name another driver, inventory or environment. The types are
// package cuda's, named here so that a caller needs no other package.
type (
	// DevicesReport is what Devices returns and `ckpt devices --json`
	// prints (docs/cli-json.md, "devices"): the driver, every visible GPU
	// and the environment.
	DevicesReport = cuda.DevicesReport
	// GPUReport is one GPU of a DevicesReport.
	GPUReport = cuda.GPUReport
	// DeviceSource is what Devices asks of the machine: its GPUs and a
	// description of the driver. CUDASystem is the real one.
	DeviceSource = cuda.ReportSource
	// Inventory lists the GPUs the pre-flight judges a plan against
	// (WithInventory). CUDASystem and *CUDADriver are inventories.
	Inventory = cuda.Inventory
	// CUDASystem is the installed CUDA driver as a DeviceSource and an
	// Inventory. Its zero value uses libcuda.so.1; Library names another
	// driver library.
	CUDASystem = cuda.System
	// CUDADriver is an initialised CUDA driver (OpenCUDALibrary,
	// WithDriver).
	CUDADriver = cuda.Driver
	// CUDAEnv is how CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER shape the
	// GPUs this process sees (CUDAEnvironment, WithEnv).
	CUDAEnv = cuda.Env
	// ReleaseSource says where a DevicesReport's driver release was read
	// (its Driver.ReleaseSource).
	ReleaseSource = cuda.ReleaseSource
)

// Where a driver release is read, most authoritative first.
const (
	ReleaseKernelModule = cuda.ReleaseKernelModule // /proc/driver/nvidia/version
	ReleaseNVML         = cuda.ReleaseNVML         // NVIDIA's management library
	ReleaseLibraryFile  = cuda.ReleaseLibraryFile  // the driver library's file name
)

// Devices describes the NVIDIA driver, every GPU src sees and how env
// shapes that list: what `ckpt devices` prints. src is CUDASystem{} for
// the installed driver; env is usually CUDAEnvironment(os.LookupEnv). A
// missing driver or GPU is a normal answer in the report; the error is
// only ctx's.
func Devices(ctx context.Context, src DeviceSource, env CUDAEnv) (*DevicesReport, error) {
	return cuda.NewDevicesReport(ctx, src, env)
}

// OpenCUDALibrary opens and initialises the CUDA driver library at path
// instead of the system's libcuda.so.1, for WithDriver: a fake driver in
// tests, or one installed outside the loader's search path (the ckpt
// command's CKPT_LIBCUDA). Errors match cuda.ErrNoDriver,
// cuda.ErrDriverTooOld or carry a *cuda.CUDAError.
func OpenCUDALibrary(path string) (*CUDADriver, error) { return cuda.OpenLibrary(path) }

// CUDAEnvironment reads CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER through
// lookup (os.LookupEnv, or a fake) and says what CUDA makes of them. It
// never fails: what is questionable lands in the result's Notes.
func CUDAEnvironment(lookup func(key string) (string, bool)) CUDAEnv {
	return cuda.Environment(lookup)
}
