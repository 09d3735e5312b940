package cuda

import "unsafe"

// cuResult is CUresult.
type cuResult int32

// api holds the bound driver functions. C types map as: CUresult -> int32,
// CUdevice/int -> int32, size_t and CUdeviceptr -> uint64 (libcuda exists
// only for 64-bit targets), handles (CUcontext, CUstream, CUevent, CUmodule,
// CUfunction) -> uintptr.
type api struct {
	cuInit                    func(flags uint32) cuResult
	cuDriverGetVersion        func(v *int32) cuResult
	cuDeviceGetCount          func(n *int32) cuResult
	cuDeviceGet               func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName           func(name *byte, n int32, dev int32) cuResult
	cuDeviceTotalMem          func(bytes *uint64, dev int32) cuResult
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) cuResult
	cuDeviceGetUuid           func(uuid *[16]byte, dev int32) cuResult
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) cuResult
	cuDevicePrimaryCtxRelease func(dev int32) cuResult
	cuCtxGetCurrent           func(ctx *uintptr) cuResult
	cuCtxSetCurrent           func(ctx uintptr) cuResult
	cuCtxSynchronize          func() cuResult
	cuMemGetInfo              func(free, total *uint64) cuResult
	cuMemAlloc                func(p *uint64, n uint64) cuResult
	cuMemFree                 func(p uint64) cuResult
	cuMemHostAlloc            func(p *unsafe.Pointer, n uint64, flags uint32) cuResult
	cuMemFreeHost             func(p unsafe.Pointer) cuResult
	cuMemHostRegister         func(p unsafe.Pointer, n uint64, flags uint32) cuResult
	cuMemHostUnregister       func(p unsafe.Pointer) cuResult
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) cuResult
	cuMemcpyDtoH              func(dst unsafe.Pointer, src uint64, n uint64) cuResult
	cuMemsetD8                func(dst uint64, v uint8, n uint64) cuResult
	cuStreamCreate            func(s *uintptr, flags uint32) cuResult
	cuStreamDestroy           func(s uintptr) cuResult
	cuStreamSynchronize       func(s uintptr) cuResult
	cuEventCreate             func(e *uintptr, flags uint32) cuResult
	cuEventDestroy            func(e uintptr) cuResult
	cuEventRecord             func(e, s uintptr) cuResult
	cuEventSynchronize        func(e uintptr) cuResult
	cuEventElapsedTime        func(ms *float32, start, end uintptr) cuResult // optional: timing only
	cuDeviceGetUuidLegacy     func(uuid *[16]byte, dev int32) cuResult       // optional: tells MIG instances apart
	cuModuleLoadData          func(m *uintptr, image unsafe.Pointer) cuResult
	cuModuleGetFunction       func(f *uintptr, m uintptr, name *byte) cuResult
	cuModuleUnload            func(m uintptr) cuResult
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, sharedMem uint32, stream uintptr, params, extra unsafe.Pointer) cuResult
	cuGetErrorName            func(code cuResult, s **byte) cuResult
	cuGetErrorString          func(code cuResult, s **byte) cuResult

	// path is the file the library was loaded from, symlinks resolved by
	// the loader ("/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03");
	// "" when unknown.
	path string
}

// symbols lists, for each api field, the versioned symbol names to try in
// order (the bare names of the _v2 functions are legacy 32-bit ABIs), and
// whether the field may stay nil when the library has none of them.
func (a *api) symbols() []struct {
	fptr     any
	names    []string
	optional bool
} {
	type s = struct {
		fptr     any
		names    []string
		optional bool
	}
	return []s{
		{&a.cuInit, []string{"cuInit"}, false},
		{&a.cuDriverGetVersion, []string{"cuDriverGetVersion"}, false},
		{&a.cuDeviceGetCount, []string{"cuDeviceGetCount"}, false},
		{&a.cuDeviceGet, []string{"cuDeviceGet"}, false},
		{&a.cuDeviceGetName, []string{"cuDeviceGetName"}, false},
		{&a.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}, false},
		{&a.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}, false},
		{&a.cuDeviceGetUuid, []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, false},
		{&a.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}, false},
		{&a.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2"}, false},
		{&a.cuCtxGetCurrent, []string{"cuCtxGetCurrent"}, false},
		{&a.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}, false},
		{&a.cuCtxSynchronize, []string{"cuCtxSynchronize"}, false},
		{&a.cuMemGetInfo, []string{"cuMemGetInfo_v2"}, false},
		{&a.cuMemAlloc, []string{"cuMemAlloc_v2"}, false},
		{&a.cuMemFree, []string{"cuMemFree_v2"}, false},
		{&a.cuMemHostAlloc, []string{"cuMemHostAlloc"}, false},
		{&a.cuMemFreeHost, []string{"cuMemFreeHost"}, false},
		{&a.cuMemHostRegister, []string{"cuMemHostRegister_v2"}, false},
		{&a.cuMemHostUnregister, []string{"cuMemHostUnregister"}, false},
		{&a.cuMemcpyHtoDAsync, []string{"cuMemcpyHtoDAsync_v2"}, false},
		{&a.cuMemcpyDtoH, []string{"cuMemcpyDtoH_v2"}, false},
		{&a.cuMemsetD8, []string{"cuMemsetD8_v2"}, false},
		{&a.cuStreamCreate, []string{"cuStreamCreate"}, false},
		{&a.cuStreamDestroy, []string{"cuStreamDestroy_v2"}, false},
		{&a.cuStreamSynchronize, []string{"cuStreamSynchronize"}, false},
		{&a.cuEventCreate, []string{"cuEventCreate"}, false},
		{&a.cuEventDestroy, []string{"cuEventDestroy_v2"}, false},
		{&a.cuEventRecord, []string{"cuEventRecord"}, false},
		{&a.cuEventSynchronize, []string{"cuEventSynchronize"}, false},
		{&a.cuEventElapsedTime, []string{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, true},
		{&a.cuDeviceGetUuidLegacy, []string{"cuDeviceGetUuid"}, true},
		{&a.cuModuleLoadData, []string{"cuModuleLoadData"}, false},
		{&a.cuModuleGetFunction, []string{"cuModuleGetFunction"}, false},
		{&a.cuModuleUnload, []string{"cuModuleUnload"}, false},
		{&a.cuLaunchKernel, []string{"cuLaunchKernel"}, false},
		{&a.cuGetErrorName, []string{"cuGetErrorName"}, false},
		{&a.cuGetErrorString, []string{"cuGetErrorString"}, false},
	}
}
