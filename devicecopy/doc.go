// Package devicecopy owns ckpt's access to NVIDIA GPUs: a binding to the
// CUDA driver API (libcuda.so.1) loaded at run time with purego, so that one
// binary, built without cgo, runs on machines with and without a GPU; the
// translation of CUDA result codes into plain-language errors; the listing
// of visible devices behind the Inventory interface; and the reading of
// CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER.
//
// Nothing is loaded until the first call to Open (never in init). On a
// machine without the NVIDIA driver Open returns an error matching
// ErrNoDriver.
//
// CUDA driver calls act on the calling OS thread's current context. Every
// method of Context pins its goroutine to its OS thread, makes the device's
// primary context current, makes the call and restores the thread's
// previous context, so callers never manage threads or contexts themselves.
// Uploads built on these thin wrappers come later.
package devicecopy
