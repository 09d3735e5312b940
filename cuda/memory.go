package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"
)

// Thin wrappers over the memory, stream, event, module and launch calls,
// for the upload path. Each binds the context for the call (see Context).

// DevicePtr is a device address (CUdeviceptr).
type DevicePtr uint64

// Stream is a CUDA stream handle; 0 is the legacy default stream.
type Stream uintptr

// Event is a CUDA event handle.
type Event uintptr

// Module is a loaded kernel module.
type Module uintptr

// Function is a kernel in a Module.
type Function uintptr

// Flags for MemHostAlloc (CU_MEMHOSTALLOC_*), MemHostRegister
// (CU_MEMHOSTREGISTER_*), NewStream (CU_STREAM_*) and NewEvent (CU_EVENT_*).
const (
	HostAllocPortable      = 0x01
	HostAllocWriteCombined = 0x04
	HostRegisterPortable   = 0x01
	StreamNonBlocking      = 0x01
	EventDisableTiming     = 0x02
)

// Synchronize waits for all work in the context to finish.
func (c *Context) Synchronize() error {
	return c.do("cuCtxSynchronize", func() cuResult { return c.d.api.cuCtxSynchronize() })
}

// MemGetInfo returns the device's free and total memory in bytes.
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	err = c.do("cuMemGetInfo_v2", func() cuResult { return c.d.api.cuMemGetInfo(&free, &total) })
	return free, total, err
}

// MemAlloc allocates n bytes of device memory.
func (c *Context) MemAlloc(n uint64) (DevicePtr, error) {
	var p uint64
	err := c.do("cuMemAlloc_v2", func() cuResult { return c.d.api.cuMemAlloc(&p, n) })
	return DevicePtr(p), err
}

// MemFree frees memory from MemAlloc.
func (c *Context) MemFree(p DevicePtr) error {
	return c.do("cuMemFree_v2", func() cuResult { return c.d.api.cuMemFree(uint64(p)) })
}

// MemsetD8 sets n bytes at p to v.
func (c *Context) MemsetD8(p DevicePtr, v byte, n uint64) error {
	return c.do("cuMemsetD8_v2", func() cuResult { return c.d.api.cuMemsetD8(uint64(p), v, n) })
}

// MemHostAlloc allocates n bytes of page-locked host memory, the only
// source from which MemcpyHtoDAsync is asynchronous. The slice is C memory:
// free it with MemFreeHost, never let it outlive that.
func (c *Context) MemHostAlloc(n int, flags uint32) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("cuda: MemHostAlloc of %d bytes", n)
	}
	var p unsafe.Pointer
	err := c.do("cuMemHostAlloc", func() cuResult { return c.d.api.cuMemHostAlloc(&p, uint64(n), flags) })
	if err != nil {
		return nil, hostMemoryError(err)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// MemFreeHost frees a buffer from MemHostAlloc.
func (c *Context) MemFreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.do("cuMemFreeHost", func() cuResult { return c.d.api.cuMemFreeHost(unsafe.Pointer(&b[0])) })
}

// MemHostRegister page-locks existing host memory. b must stay reachable
// and unchanged in size until MemHostUnregister.
func (c *Context) MemHostRegister(b []byte, flags uint32) error {
	if len(b) == 0 {
		return nil
	}
	return hostMemoryError(c.do("cuMemHostRegister_v2", func() cuResult {
		return c.d.api.cuMemHostRegister(unsafe.Pointer(&b[0]), uint64(len(b)), flags)
	}))
}

// hostMemoryError rewrites CUDA_ERROR_OUT_OF_MEMORY from a host page-lock
// call: it is host memory that ran out, not the GPU's.
func hostMemoryError(err error) error {
	var ce *CUDAError
	if errors.As(err, &ce) && ce.Code == 2 {
		ce.Meaning = "the host could not page-lock (pin) that much memory"
		ce.Hint = "page-locked host memory is limited by free RAM and by the locked-memory limit (ulimit -l, RLIMIT_MEMLOCK; " +
			"containers often set it low): free host memory, raise the limit, or use fewer or smaller staging buffers"
		ce.sentinel = ErrHostMemory
	}
	return err
}

// MemHostUnregister undoes MemHostRegister.
func (c *Context) MemHostUnregister(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return c.do("cuMemHostUnregister", func() cuResult { return c.d.api.cuMemHostUnregister(unsafe.Pointer(&b[0])) })
}

// MemcpyHtoDAsync queues a copy of src to dst on s. src must be page-locked
// (MemHostAlloc or MemHostRegister) and must not be reused until the stream
// has passed the copy.
func (c *Context) MemcpyHtoDAsync(dst DevicePtr, src []byte, s Stream) error {
	if len(src) == 0 {
		return nil
	}
	return c.do("cuMemcpyHtoDAsync_v2", func() cuResult {
		return c.d.api.cuMemcpyHtoDAsync(uint64(dst), unsafe.Pointer(&src[0]), uint64(len(src)), uintptr(s))
	})
}

// MemcpyDtoH copies len(dst) bytes from src into dst, synchronously.
func (c *Context) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return c.do("cuMemcpyDtoH_v2", func() cuResult {
		return c.d.api.cuMemcpyDtoH(unsafe.Pointer(&dst[0]), uint64(src), uint64(len(dst)))
	})
}

// NewStream creates a stream.
func (c *Context) NewStream(flags uint32) (Stream, error) {
	var s uintptr
	err := c.do("cuStreamCreate", func() cuResult { return c.d.api.cuStreamCreate(&s, flags) })
	return Stream(s), err
}

// DestroyStream destroys a stream from NewStream.
func (c *Context) DestroyStream(s Stream) error {
	return c.do("cuStreamDestroy_v2", func() cuResult { return c.d.api.cuStreamDestroy(uintptr(s)) })
}

// SynchronizeStream waits for the work queued on s.
func (c *Context) SynchronizeStream(s Stream) error {
	return c.do("cuStreamSynchronize", func() cuResult { return c.d.api.cuStreamSynchronize(uintptr(s)) })
}

// NewEvent creates an event.
func (c *Context) NewEvent(flags uint32) (Event, error) {
	var e uintptr
	err := c.do("cuEventCreate", func() cuResult { return c.d.api.cuEventCreate(&e, flags) })
	return Event(e), err
}

// DestroyEvent destroys an event from NewEvent.
func (c *Context) DestroyEvent(e Event) error {
	return c.do("cuEventDestroy_v2", func() cuResult { return c.d.api.cuEventDestroy(uintptr(e)) })
}

// RecordEvent records e on s.
func (c *Context) RecordEvent(e Event, s Stream) error {
	return c.do("cuEventRecord", func() cuResult { return c.d.api.cuEventRecord(uintptr(e), uintptr(s)) })
}

// SynchronizeEvent waits for e.
func (c *Context) SynchronizeEvent(e Event) error {
	return c.do("cuEventSynchronize", func() cuResult { return c.d.api.cuEventSynchronize(uintptr(e)) })
}

// ElapsedMillis returns the time between two recorded events in ms. It is
// for measurements only; with a driver that lacks cuEventElapsedTime(_v2)
// it returns a *LoadError matching ErrDriverTooOld.
func (c *Context) ElapsedMillis(start, end Event) (float32, error) {
	if err := c.usable("ElapsedMillis"); err != nil {
		return 0, err
	}
	if c.d.api.cuEventElapsedTime == nil {
		return 0, &LoadError{Library: driverLibraryName, Symbol: "cuEventElapsedTime_v2", Err: ErrDriverTooOld}
	}
	var ms float32
	err := c.do("cuEventElapsedTime", func() cuResult { return c.d.api.cuEventElapsedTime(&ms, uintptr(start), uintptr(end)) })
	return ms, err
}

// LoadModule loads a PTX (text) or cubin/fatbin image. A NUL terminator is
// added, as PTX text needs one.
func (c *Context) LoadModule(image []byte) (Module, error) {
	img := append(append(make([]byte, 0, len(image)+1), image...), 0)
	var m uintptr
	err := c.do("cuModuleLoadData", func() cuResult { return c.d.api.cuModuleLoadData(&m, unsafe.Pointer(&img[0])) })
	return Module(m), err
}

// UnloadModule unloads a module from LoadModule.
func (c *Context) UnloadModule(m Module) error {
	return c.do("cuModuleUnload", func() cuResult { return c.d.api.cuModuleUnload(uintptr(m)) })
}

// Function looks up an extern "C" kernel by name in m.
func (c *Context) Function(m Module, name string) (Function, error) {
	cname := append([]byte(name), 0)
	var f uintptr
	err := c.do("cuModuleGetFunction", func() cuResult { return c.d.api.cuModuleGetFunction(&f, uintptr(m), &cname[0]) })
	return Function(f), err
}

// Launch queues kernel f on s with the given grid and block sizes and
// dynamic shared memory. args holds one pointer per kernel parameter, each
// to a value of that parameter's exact C type; the driver copies the values
// during the call. The array of pointers and the values are Go memory
// handed to C: they are pinned (runtime.Pinner) for the call, so the
// garbage collector neither moves nor frees them while the driver reads
// them.
func (c *Context) Launch(f Function, grid, block [3]uint32, sharedMem uint32, s Stream, args ...unsafe.Pointer) error {
	var params unsafe.Pointer
	var pin runtime.Pinner
	defer pin.Unpin()
	if len(args) > 0 {
		for _, a := range args {
			pin.Pin(a)
		}
		pin.Pin(&args[0])
		params = unsafe.Pointer(&args[0])
	}
	return c.do("cuLaunchKernel", func() cuResult {
		return c.d.api.cuLaunchKernel(uintptr(f), grid[0], grid[1], grid[2], block[0], block[1], block[2],
			sharedMem, uintptr(s), params, nil)
	})
}
