package cuda

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"
)

// Device attributes used by Devices (CUdevice_attribute values of cuda.h).
const (
	attrPCIBusID    = 33
	attrPCIDeviceID = 34
	attrPCIDomainID = 50
	attrCCMajor     = 75
	attrCCMinor     = 76
)

// Driver is an initialised CUDA driver. The zero value and nil are not
// usable: their methods return errors matching ErrNoDriver.
type Driver struct {
	api     *api
	version Version
}

// Version is a CUDA version as cuDriverGetVersion reports it:
// 1000*major + 10*minor (13000 is CUDA 13.0).
type Version int

// Major returns the major version.
func (v Version) Major() int { return int(v) / 1000 }

// Minor returns the minor version.
func (v Version) Minor() int { return int(v) % 1000 / 10 }

// String returns "major.minor", such as "13.0".
func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major(), v.Minor()) }

// Open loads libcuda.so.1 (once per process) and initialises the driver
// with cuInit. Without an NVIDIA driver it returns an error matching
// ErrNoDriver; when the driver sees no GPU (including when
// CUDA_VISIBLE_DEVICES hides them all) a *CUDAError matching ErrNoDevice.
func Open() (*Driver, error) {
	a, err := loadDriver()
	if err != nil {
		return nil, err
	}
	return open(a)
}

func open(a *api) (*Driver, error) {
	d := &Driver{api: a}
	var v int32
	if err := d.check("cuDriverGetVersion", a.cuDriverGetVersion(&v)); err != nil {
		return nil, err
	}
	d.version = Version(v)
	if err := d.check("cuInit", a.cuInit(0)); err != nil {
		return nil, err
	}
	return d, nil
}

// usable returns an error matching ErrNoDriver for a nil or zero Driver.
func (d *Driver) usable(op string) error {
	if d == nil || d.api == nil {
		return &LoadError{Library: driverLibraryName, Reason: op + " called on a Driver not returned by Open", Err: ErrNoDriver}
	}
	return nil
}

// driverLibraryName is the soname the NVIDIA driver installs.
const driverLibraryName = "libcuda.so.1"

// check turns a CUresult into nil or a *CUDAError for op.
func (d *Driver) check(op string, r cuResult) error {
	if r == 0 {
		return nil
	}
	var name, str string
	var p *byte
	if d.api.cuGetErrorName(r, &p) == 0 {
		name = cString(p)
	}
	p = nil
	if d.api.cuGetErrorString(r, &p) == 0 {
		str = cString(p)
	}
	return newCUDAError(op, int(r), name, str)
}

// cString copies a NUL-terminated C string of at most 4096 bytes.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 4096; i++ {
		c := *(*byte)(unsafe.Add(unsafe.Pointer(p), i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

// Version returns the newest CUDA version the driver supports.
func (d *Driver) Version() Version {
	if d == nil {
		return 0
	}
	return d.version
}

// DeviceCount returns how many GPUs the driver exposes to this process,
// after CUDA_VISIBLE_DEVICES.
func (d *Driver) DeviceCount() (int, error) {
	if err := d.usable("DeviceCount"); err != nil {
		return 0, err
	}
	var n int32
	if err := d.check("cuDeviceGetCount", d.api.cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceInfo describes one visible GPU.
type DeviceInfo struct {
	Ordinal int    // index inside this process (cuda:N), after CUDA_VISIBLE_DEVICES
	Name    string // marketing name, e.g. "NVIDIA H100 80GB HBM3"
	// UUID is "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as nvidia-smi
	// prints it, or "MIG-..." for a MIG instance.
	UUID              string
	MIG               bool   // the device is a MIG instance of a larger GPU
	ComputeCapability [2]int // major, minor: {9, 0} for sm_90
	TotalMemory       uint64 // bytes
	FreeMemory        uint64 // bytes free when measured; valid when FreeKnown
	// FreeKnown is set once free memory was measured: Driver.Devices lists
	// without measuring it (that needs a context on the device), see
	// Driver.FreeMemory.
	FreeKnown bool
	PCIBusID  string // "0000:65:00.0"
	// Err is why this device could not be described (the fields after
	// Ordinal may then be empty), or nil. One failing GPU does not hide the
	// others: Devices lists each with its own error.
	Err error
}

// Devices lists every visible GPU in ordinal order, from attribute queries
// only: no context is created, so a GPU that is busy in exclusive-process
// mode, full, or faulted is still listed, with its own Err; free memory is
// not measured (FreeKnown is false; see FreeMemory). The error is for the
// whole listing: the device count could not be read, or ctx ended.
func (d *Driver) Devices(ctx context.Context) ([]DeviceInfo, error) {
	n, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, err := d.Device(i)
		if err != nil {
			info = DeviceInfo{Ordinal: i, Err: err}
		}
		out = append(out, info)
	}
	return out, nil
}

// device returns the CUdevice of ordinal.
func (d *Driver) device(ordinal int) (int32, error) {
	if err := d.usable("Device"); err != nil {
		return 0, err
	}
	if ordinal < 0 || ordinal > 1<<20 {
		return 0, fmt.Errorf("%w: %d", ErrInvalidDevice, ordinal)
	}
	var dev int32
	if err := d.check("cuDeviceGet", d.api.cuDeviceGet(&dev, int32(ordinal))); err != nil {
		return 0, err
	}
	return dev, nil
}

// Device describes the GPU with the given ordinal from attribute queries,
// without creating a context (free memory is left unmeasured).
func (d *Driver) Device(ordinal int) (DeviceInfo, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: ordinal}
	var name [256]byte
	if err := d.check("cuDeviceGetName", d.api.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return DeviceInfo{}, err
	}
	name[len(name)-1] = 0
	info.Name = cString(&name[0])
	if err := d.check("cuDeviceTotalMem_v2", d.api.cuDeviceTotalMem(&info.TotalMemory, dev)); err != nil {
		return DeviceInfo{}, err
	}
	var uuid [16]byte
	if err := d.check("cuDeviceGetUuid_v2", d.api.cuDeviceGetUuid(&uuid, dev)); err != nil {
		return DeviceInfo{}, err
	}
	// cuDeviceGetUuid_v2 returns a MIG instance's own UUID, the legacy
	// cuDeviceGetUuid its parent GPU's: they differ only on MIG.
	var parent [16]byte
	if f := d.api.cuDeviceGetUuidLegacy; f != nil && f(&parent, dev) == 0 && parent != uuid {
		info.MIG = true
	}
	info.UUID = FormatUUID(uuid)
	if info.MIG {
		info.UUID = FormatMIGUUID(uuid)
	}
	var attrs [5]int32
	for i, a := range []int32{attrCCMajor, attrCCMinor, attrPCIDomainID, attrPCIBusID, attrPCIDeviceID} {
		if err := d.check("cuDeviceGetAttribute", d.api.cuDeviceGetAttribute(&attrs[i], a, dev)); err != nil {
			return DeviceInfo{}, err
		}
	}
	info.ComputeCapability = [2]int{int(attrs[0]), int(attrs[1])}
	info.PCIBusID = FormatPCIBusID(int(attrs[2]), int(attrs[3]), int(attrs[4]))
	return info, nil
}

// FreeMemory measures the free memory of the GPU with the given ordinal.
// That needs the device's primary context: it is retained for the call
// (created if nobody holds it, which itself takes some device memory) and
// released. It fails where a context cannot be had: a GPU busy in
// exclusive-process mode, one too full for a context, a faulted one.
func (d *Driver) FreeMemory(ctx context.Context, ordinal int) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c, err := d.PrimaryContext(ordinal)
	if err != nil {
		return 0, err
	}
	free, _, err := c.MemGetInfo()
	if rerr := c.Release(); err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	return free, nil
}

// FormatUUID writes a device UUID the way nvidia-smi does:
// "GPU-" and 8-4-4-4-12 lower-case hex digits.
func FormatUUID(u [16]byte) string {
	return "GPU-" + formatUUID(u)
}

// FormatMIGUUID writes a MIG instance's UUID the way nvidia-smi does:
// "MIG-" and 8-4-4-4-12 lower-case hex digits.
func FormatMIGUUID(u [16]byte) string {
	return "MIG-" + formatUUID(u)
}

func formatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// FormatPCIBusID writes a PCI address as "domain:bus:device.function" with
// 4, 2 and 2 hex digits ("0000:65:00.0"), the form cudaDeviceGetPCIBusId
// uses. CUDA reports no function number; GPUs are function 0.
func FormatPCIBusID(domain, bus, device int) string {
	return fmt.Sprintf("%04x:%02x:%02x.0", domain, bus, device)
}

// Context is a retained primary context of one device. Its methods may be
// called from any goroutine: each one binds the context to the calling OS
// thread for the duration of the driver call.
type Context struct {
	d       *Driver
	dev     int32
	handle  uintptr
	ordinal int
}

// PrimaryContext retains the primary context of the device with the given
// ordinal (creating it if this is its first user). Release it when done.
func (d *Driver) PrimaryContext(ordinal int) (*Context, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return nil, err
	}
	var h uintptr
	if err := d.check("cuDevicePrimaryCtxRetain", d.api.cuDevicePrimaryCtxRetain(&h, dev)); err != nil {
		return nil, err
	}
	return &Context{d: d, dev: dev, handle: h, ordinal: ordinal}, nil
}

// Ordinal returns the device ordinal the context belongs to.
func (c *Context) Ordinal() int { return c.ordinal }

// Release drops this reference to the primary context. The Context must
// not be used afterwards; releasing twice returns an error.
func (c *Context) Release() error {
	if err := c.usable("Release"); err != nil {
		return err
	}
	err := c.d.check("cuDevicePrimaryCtxRelease_v2", c.d.api.cuDevicePrimaryCtxRelease(c.dev))
	c.handle = 0
	return err
}

func (c *Context) usable(op string) error {
	if c == nil || c.handle == 0 {
		return &LoadError{Library: driverLibraryName, Reason: op + " called on a released or zero Context", Err: ErrNoDriver}
	}
	return c.d.usable(op)
}

// do runs call with the context current on a locked OS thread, then
// restores the thread's previous current context.
func (c *Context) do(op string, call func() cuResult) error {
	if err := c.usable(op); err != nil {
		return err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := c.d.api
	var prev uintptr
	if err := c.d.check("cuCtxGetCurrent", a.cuCtxGetCurrent(&prev)); err != nil {
		return err
	}
	if err := c.d.check("cuCtxSetCurrent", a.cuCtxSetCurrent(c.handle)); err != nil {
		return err
	}
	err := c.d.check(op, call())
	if rerr := c.d.check("cuCtxSetCurrent", a.cuCtxSetCurrent(prev)); err == nil {
		err = rerr
	}
	return err
}
