package cuda

import (
	"errors"
	"fmt"
	"sync"
)

var (
	// ErrNoDriver reports that libcuda.so.1, the NVIDIA driver's CUDA
	// library, could not be loaded: no NVIDIA driver is installed (or it is
	// not on the loader's search path).
	ErrNoDriver = errors.New("cuda: no NVIDIA driver is installed (libcuda.so.1 could not be loaded)")
	// ErrDriverTooOld reports a libcuda.so.1 that lacks a symbol ckpt needs.
	ErrDriverTooOld = errors.New("cuda: the NVIDIA driver is too old for ckpt")
	// ErrNoDevice matches CUDA_ERROR_NO_DEVICE: the driver sees no GPU.
	ErrNoDevice = errors.New("cuda: no CUDA-capable device is visible")
	// ErrInvalidDevice matches CUDA_ERROR_INVALID_DEVICE and ordinals out
	// of range.
	ErrInvalidDevice = errors.New("cuda: invalid device ordinal")
	// ErrOutOfMemory matches CUDA_ERROR_OUT_OF_MEMORY from a device
	// allocation.
	ErrOutOfMemory = errors.New("cuda: out of device memory")
	// ErrHostMemory matches CUDA_ERROR_OUT_OF_MEMORY from page-locking host
	// memory (cuMemHostAlloc, cuMemHostRegister): host RAM or the
	// locked-memory limit ran out, not the GPU's memory.
	ErrHostMemory = errors.New("cuda: out of page-locked host memory")
	// ErrNotInitialized matches CUDA_ERROR_NOT_INITIALIZED.
	ErrNotInitialized = errors.New("cuda: CUDA driver not initialized")
	// ErrInsufficientDriver matches the codes that say the installed
	// driver is older than what is being asked of it.
	ErrInsufficientDriver = errors.New("cuda: the installed NVIDIA driver is too old")
	// ErrDriverMismatch matches CUDA_ERROR_SYSTEM_DRIVER_MISMATCH and
	// CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: the user-space library and
	// kernel module do not belong together.
	ErrDriverMismatch = errors.New("cuda: CUDA library and kernel driver do not match")
	// ErrBadKernel matches the codes with which the driver refuses to load
	// a kernel image: CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NO_BINARY_FOR_GPU,
	// CUDA_ERROR_INVALID_PTX, CUDA_ERROR_JIT_COMPILER_NOT_FOUND,
	// CUDA_ERROR_UNSUPPORTED_PTX_VERSION and
	// CUDA_ERROR_JIT_COMPILATION_DISABLED.
	ErrBadKernel = errors.New("cuda: the driver rejected the kernel image")
)

// CUDAError is a CUDA driver call that returned a CUresult other than
// CUDA_SUCCESS.
type CUDAError struct {
	Code    int    // the CUresult value
	Name    string // e.g. "CUDA_ERROR_NO_DEVICE", from cuGetErrorName or our table
	Op      string // the driver function that failed, e.g. "cuInit"
	Meaning string // what it means, in plain language
	Hint    string // what to do about it; may be empty

	sentinel error // overrides the table's sentinel where the call gives the code another meaning
}

// Error returns a one-line message with the call, meaning, name, code and hint.
func (e *CUDAError) Error() string {
	s := fmt.Sprintf("cuda: %s failed: %s (%s, code %d)", e.Op, e.Meaning, e.Name, e.Code)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Is lets errors.Is match a CUDAError against the package's sentinels.
func (e *CUDAError) Is(target error) bool {
	if e.sentinel != nil {
		return e.sentinel == target
	}
	info, ok := cudaCodes()[e.Code]
	return ok && info.sentinel != nil && info.sentinel == target
}

type codeInfo struct {
	name, meaning, hint string
	sentinel            error
}

// cudaCodes explains the CUresult values a user of ckpt can meet. Names and
// numbers are those of CUDA 13's cuda.h (driver API), which has no 35 (that
// is the runtime API's cudaErrorInsufficientDriver; the driver API says 36).
// Built on first use.
var cudaCodes = sync.OnceValue(func() map[int]codeInfo {
	return map[int]codeInfo{
		1: {"CUDA_ERROR_INVALID_VALUE", "an argument was out of range", "this is a bug in ckpt; please report it", nil},
		2: {"CUDA_ERROR_OUT_OF_MEMORY", "the GPU does not have enough free memory",
			"free memory on the device (other processes may hold it: see nvidia-smi), pick another device, or load fewer tensors at once", ErrOutOfMemory},
		3: {"CUDA_ERROR_NOT_INITIALIZED", "the CUDA driver has not been initialized", "this is a bug in ckpt; please report it", ErrNotInitialized},
		4: {"CUDA_ERROR_DEINITIALIZED", "the CUDA driver is shutting down", "", nil},
		34: {"CUDA_ERROR_STUB_LIBRARY", "the libcuda.so.1 found is the CUDA toolkit's stub, not the driver",
			"remove the toolkit's stubs directory from LD_LIBRARY_PATH so the driver's own libcuda.so.1 is loaded", ErrNoDriver},
		36: {"CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER", "this call needs a newer NVIDIA driver", "update the NVIDIA driver", ErrInsufficientDriver},
		46: {"CUDA_ERROR_DEVICE_UNAVAILABLE", "the GPU is busy or unavailable",
			"the device may be in exclusive-process compute mode and used by another process (see nvidia-smi)", nil},
		100: {"CUDA_ERROR_NO_DEVICE", "the driver found no CUDA-capable GPU",
			"check that a GPU is installed and that CUDA_VISIBLE_DEVICES does not hide every GPU (an empty value hides all)", ErrNoDevice},
		101: {"CUDA_ERROR_INVALID_DEVICE", "the device ordinal does not name a visible GPU",
			"run `ckpt devices` to list the visible ordinals; CUDA_VISIBLE_DEVICES renumbers them from 0", ErrInvalidDevice},
		200: {"CUDA_ERROR_INVALID_IMAGE", "the kernel image is not valid for this device", "", ErrBadKernel},
		201: {"CUDA_ERROR_INVALID_CONTEXT", "no valid CUDA context is current", "this is a bug in ckpt; please report it", nil},
		209: {"CUDA_ERROR_NO_BINARY_FOR_GPU", "the kernel image has no code for this GPU",
			"ckpt's checksum kernel has code for compute capability 7.5 (Turing) and newer only", ErrBadKernel},
		218: {"CUDA_ERROR_INVALID_PTX", "the driver could not compile the PTX kernel", "this is a bug in ckpt's kernels; please report it", ErrBadKernel},
		221: {"CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "the driver's PTX JIT compiler library (libnvidia-ptxjitcompiler.so) was not found",
			"install the NVIDIA driver's PTX JIT compiler library (in containers: the compute capability of the NVIDIA container toolkit)", ErrBadKernel},
		222: {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the PTX kernel needs a newer driver than the one installed",
			"update the NVIDIA driver", ErrBadKernel},
		223: {"CUDA_ERROR_JIT_COMPILATION_DISABLED", "PTX JIT compilation is disabled on this machine",
			"unset CUDA_DISABLE_PTX_JIT if it is set", ErrBadKernel},
		400: {"CUDA_ERROR_INVALID_HANDLE", "a CUDA handle (stream, event, module) was not valid", "this is a bug in ckpt; please report it", nil},
		500: {"CUDA_ERROR_NOT_FOUND", "a named symbol (such as a kernel) was not found", "", nil},
		600: {"CUDA_ERROR_NOT_READY", "the asynchronous work has not finished yet", "", nil},
		700: {"CUDA_ERROR_ILLEGAL_ADDRESS", "a kernel accessed memory it does not own; the context is now unusable",
			"restart the process", nil},
		701: {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "the kernel launch asked for more resources than the GPU has", "", nil},
		712: {"CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "the host memory is already page-locked", "", nil},
		713: {"CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "the host memory is not page-locked", "", nil},
		719: {"CUDA_ERROR_LAUNCH_FAILED", "a kernel failed while running; the context is now unusable", "restart the process", nil},
		800: {"CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted", "", nil},
		801: {"CUDA_ERROR_NOT_SUPPORTED", "the operation is not supported on this system or device", "", nil},
		802: {"CUDA_ERROR_SYSTEM_NOT_READY", "the GPU system is not ready (for example fabric manager not running on NVSwitch systems)",
			"check that nvidia-fabricmanager is running, then retry", nil},
		803: {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "the CUDA user-space library and the NVIDIA kernel module have different versions",
			"reboot after a driver update, or reinstall the driver so that libcuda.so.1 and the kernel module match", ErrDriverMismatch},
		804: {"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "the CUDA forward-compatibility library does not support this GPU",
			"remove the cuda-compat library from LD_LIBRARY_PATH or use a driver that natively supports this CUDA version", ErrDriverMismatch},
		999: {"CUDA_ERROR_UNKNOWN", "an unknown internal driver error", "check dmesg for NVIDIA Xid messages", nil},
	}
})

// newCUDAError builds the error for code returned by op. driverName and
// driverString are what cuGetErrorName/cuGetErrorString said ("" when the
// driver could not tell).
func newCUDAError(op string, code int, driverName, driverString string) *CUDAError {
	e := &CUDAError{Code: code, Op: op, Name: driverName}
	info, known := cudaCodes()[code]
	if e.Name == "" {
		e.Name = info.name
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("CUresult(%d)", code)
	}
	e.Meaning, e.Hint = info.meaning, info.hint
	if !known {
		e.Meaning = driverString
		if e.Meaning == "" {
			e.Meaning = "the driver returned an error ckpt does not know"
		}
	}
	return e
}

// LoadError reports that libcuda.so.1 could not be loaded or lacks a
// symbol. It wraps ErrNoDriver or ErrDriverTooOld.
type LoadError struct {
	Library string // the library name or path tried
	Symbol  string // the missing symbol, for ErrDriverTooOld
	Reason  string // the dynamic loader's message
	Err     error  // ErrNoDriver or ErrDriverTooOld
}

// Error says no driver is installed, or which symbol is missing.
func (e *LoadError) Error() string {
	if e.Symbol != "" {
		return fmt.Sprintf("%v: %s has no symbol %s", e.Err, e.Library, e.Symbol)
	}
	if e.Reason == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v: %s", e.Err, e.Reason)
}

// Unwrap returns ErrNoDriver or ErrDriverTooOld.
func (e *LoadError) Unwrap() error { return e.Err }
