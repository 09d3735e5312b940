// Package cuda is ckpt's access to NVIDIA GPUs: a binding to the CUDA
// driver API (libcuda.so.1) loaded at run time with purego, so that one
// binary, built without cgo, runs on machines with and without a GPU; the
// translation of CUDA result codes into plain-language errors; the listing
// of visible devices behind the Inventory interface (attribute queries only,
// each device with its own error, so one failing GPU hides no other); the
// reading of CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER; the driver release
// (kernel module, NVML, library file name); and the report `ckpt devices`
// prints.
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
// Package devicecopy builds on this one: its pre-flight judges a plan
// against an Inventory, and its uploads go through a Driver's Contexts.
//
// Which file holds what:
//
//   - api.go, loader_*.go, library_*.go: the bound driver functions and
//     loading libcuda; driver.go: Driver, Open and device attributes;
//     memory.go: memory, stream, event, module and launch calls;
//     errors.go: CUDAError and LoadError.
//   - inventory.go, env.go, nvml_*.go: Inventory, System,
//     CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER, the driver release.
//   - report.go: NewDevicesReport, what `ckpt devices` prints (JSON form
//     included).
package cuda
