// Package devicecopy owns ckpt's access to NVIDIA GPUs: a binding to the
// CUDA driver API (libcuda.so.1) loaded at run time with purego, so that one
// binary, built without cgo, runs on machines with and without a GPU; the
// translation of CUDA result codes into plain-language errors; the listing
// of visible devices behind the Inventory interface (attribute queries only,
// each device with its own error, so one failing GPU hides no other); and
// the reading of CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER.
//
// Nothing is loaded until the first call to Open (never in init). On a
// machine without the NVIDIA driver Open returns an error matching
// ErrNoDriver.
//
// CUDA driver calls act on the calling OS thread's current context. Every
// method of Context pins its goroutine to its OS thread, makes the device's
// primary context current, makes the call and restores the thread's
// previous context, so callers never manage threads or contexts themselves.
//
// On top of the binding: Preflight checks a remap.Plan against the devices
// it uses (and only those) before anything is copied; LoadHost reads cpu-bound storages into host
// memory with CRC32 and xxh64c checks; Upload copies GPU-bound storages
// through page-locked staging buffers into one arena per device and
// verifies them on the device with the kernel of package kernels.
//
// Which file holds what:
//
//   - api.go, loader_*.go, library_*.go: the bound driver functions and
//     loading libcuda; driver.go: Driver, Open and device attributes;
//     memory.go: memory, stream, event, module and launch calls;
//     errors.go: CUDAError and LoadError.
//   - inventory.go, env.go, nvml_*.go: Inventory, CUDA_VISIBLE_DEVICES /
//     CUDA_DEVICE_ORDER, the driver release from NVML.
//   - report.go: NewDevicesReport, what `ckpt devices` prints (JSON form
//     included).
//   - preflight.go: Preflight.
//   - host.go: LoadHost (cpu-bound storages into host memory).
//   - Upload, one job per file: upload.go (Upload and its options),
//     upload_state.go (DeviceState, Arena, DeviceStorage, DeviceTensor and
//     freeing them), upload_layout.go (placing storages in arenas),
//     upload_stream.go (allocating, reading through the staging buffers,
//     queueing copies, host digests), upload_kernel.go (loading and
//     launching the checksum kernel, VerifyUnavailableError).
//   - stream.go, pieces.go: reading storages from sources without cheap
//     random access, and checking pieces that arrive in any order.
//   - verify.go: VerifyError, Mismatch and DeviceState.Verify.
package devicecopy
