//go:build !linux

package cuda

// NVMLRelease reports that the NVML binding exists only on Linux.
func NVMLRelease() (release, why string) { return "", "ckpt binds NVML on Linux only" }
