package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/spf13/cobra"
)

// devicesFake is a devicesSource with canned answers.
type devicesFake struct {
	info   cuda.DriverInfo
	drvErr error
	devs   []cuda.DeviceInfo
	devErr error
}

func (f devicesFake) Driver(context.Context) (cuda.DriverInfo, error) { return f.info, f.drvErr }
func (f devicesFake) Devices(context.Context) ([]cuda.DeviceInfo, error) {
	return f.devs, f.devErr
}

var devicesTwoGPUs = devicesFake{
	info: cuda.DriverInfo{CUDAVersion: 13000, Release: "580.65.06"},
	devs: []cuda.DeviceInfo{
		{Ordinal: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", ComputeCapability: [2]int{9, 0},
			TotalMemory: 85520809984, FreeMemory: 84974239744, FreeKnown: true, PCIBusID: "0000:65:00.0"},
		{Ordinal: 1, Name: "NVIDIA H200", UUID: "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", ComputeCapability: [2]int{9, 0},
			TotalMemory: 150754820096, FreeMemory: 1 << 30, FreeKnown: true, PCIBusID: "0000:b3:00.0"},
	},
}

func devicesEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// devicesExec runs `devices args...` against src and returns stdout, the
// exit code and stderr.
func devicesExec(t *testing.T, src devicesSource, env map[string]string, args ...string) (string, int, string) {
	t.Helper()
	return execCommand(func(s *streams) *cobra.Command { return devicesCommand(s, src, devicesEnv(env)) }, args...)
}

// execCommand runs the command mk builds with args, in-process, and returns
// stdout, the exit code and stderr as the real binary would produce them.
func execCommand(mk func(*streams) *cobra.Command, args ...string) (string, int, string) {
	var out, errb bytes.Buffer
	cmd := mk(newStreams(strings.NewReader(""), &out, &errb))
	if args == nil {
		args = []string{} // nil makes cobra read os.Args: the test binary's own flags
	}
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	code := reportError(&errb, cmd.ExecuteContext(context.Background()))
	return out.String(), code, errb.String()
}

func TestDevicesFlags(t *testing.T) {
	var out bytes.Buffer
	cmd := devicesCommand(newStreams(nil, &out, io.Discard), devicesTwoGPUs, devicesEnv(nil))
	if err := cmd.ParseFlags([]string{"--json"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := cmd.Flags().GetBool("json"); !v {
		t.Error("--json not parsed")
	}
	if err := cmd.ParseFlags([]string{"--json=false"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := cmd.Flags().GetBool("json"); v {
		t.Error("--json=false not parsed")
	}
	if o, code, _ := devicesExec(t, devicesTwoGPUs, nil, "--json"); code != exitOK || !strings.HasPrefix(o, "{") {
		t.Errorf("--json: exit %d, output %q", code, o)
	}
	// Usage errors go through the root command, as in production; flags are
	// rejected before the driver is touched.
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--json=maybe"}} {
		var errb bytes.Buffer
		code := run(context.Background(), append([]string{"devices"}, args...), newStreams(strings.NewReader(""), io.Discard, &errb))
		if code != exitUsage || !strings.Contains(errb.String(), "(see 'ckpt devices --help')") {
			t.Errorf("%v: exit %d, want %d; stderr %q", args, code, exitUsage, errb.String())
		}
	}
}

func TestDevicesText(t *testing.T) {
	out, code, errs := devicesExec(t, devicesTwoGPUs, map[string]string{"CUDA_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{
		"NVIDIA driver: 580.65.06 (supports CUDA 13.0)",
		"Devices: 2 visible",
		"cuda:0  NVIDIA H100 80GB HBM3",
		"compute capability 9.0, memory 79.6 GiB total, 79.1 GiB free",
		"PCI 0000:65:00.0  GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
		"cuda:1  NVIDIA H200",
		"140.4 GiB total, 1.00 GiB free",
		`CUDA_VISIBLE_DEVICES="3,1": only the listed GPUs are visible`,
		"cuda:0 is GPU index 3 (PCI_BUS_ID order)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDevicesJSON(t *testing.T) {
	out, code, _ := devicesExec(t, devicesTwoGPUs, map[string]string{"CUDA_VISIBLE_DEVICES": "1,x,0"}, "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !rep.Driver.Found || rep.Driver.Release != "580.65.06" || rep.Driver.CUDAVersion != "13.0" || rep.Error != nil {
		t.Errorf("driver: %+v error %+v", rep.Driver, rep.Error)
	}
	if len(rep.Devices) != 2 || rep.Devices[1].FreeMemoryBytes == nil || *rep.Devices[1].FreeMemoryBytes != 1<<30 {
		t.Fatalf("devices: %+v", rep.Devices)
	}
	rep.Devices[1].FreeMemoryBytes = nil
	if rep.Devices[1] != (devicesGPUJSON{Ordinal: 1, Name: "NVIDIA H200", ComputeCapability: "9.0", TotalMemoryBytes: 150754820096, PCIBusID: "0000:b3:00.0", UUID: "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"}) {
		t.Errorf("devices: %+v", rep.Devices)
	}
	env := rep.Environment
	if env.CUDAVisibleDevices == nil || *env.CUDAVisibleDevices != "1,x,0" || env.InvalidEntry == nil || *env.InvalidEntry != "x" ||
		len(env.IgnoredEntries) != 1 || env.IgnoredEntries[0] != "0" || len(env.Visible) != 1 || *env.Visible[0].Index != 1 ||
		env.CUDADeviceOrder != nil || env.EffectiveOrder != "FASTEST_FIRST" {
		t.Errorf("environment: %+v", env)
	}
	// Every key is present even when empty, so consumers need no defaults.
	var raw map[string]any
	json.Unmarshal([]byte(out), &raw)
	for _, k := range []string{"driver", "devices", "error", "environment"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("key %q missing", k)
		}
	}
}

// devicesMeasured is a devicesSource whose listing leaves free memory
// unmeasured, as the driver's does, and that measures it on demand.
type devicesMeasured struct {
	devicesFake
	free map[int]uint64
	errs map[int]error
}

func (f devicesMeasured) FreeMemory(_ context.Context, ordinal int) (uint64, error) {
	return f.free[ordinal], f.errs[ordinal]
}

// TestDevicesOneBad: every GPU is listed, each with its own error, in text
// and JSON.
func TestDevicesOneBad(t *testing.T) {
	busy := &cuda.CUDAError{Code: 46, Name: "CUDA_ERROR_DEVICE_UNAVAILABLE", Op: "cuDevicePrimaryCtxRetain",
		Meaning: "the GPU is busy or unavailable", Hint: "the device may be in exclusive-process compute mode"}
	faulted := &cuda.CUDAError{Code: 999, Name: "CUDA_ERROR_UNKNOWN", Op: "cuDeviceGetName", Meaning: "an unknown internal driver error"}
	src := devicesMeasured{
		devicesFake: devicesFake{info: cuda.DriverInfo{CUDAVersion: 13000}, devs: []cuda.DeviceInfo{
			{Ordinal: 0, Name: "NVIDIA H100 80GB HBM3", UUID: "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", ComputeCapability: [2]int{9, 0}, TotalMemory: 80 << 30},
			{Ordinal: 1, Name: "NVIDIA H100 80GB HBM3", UUID: "MIG-00010203-0405-0607-0809-0a0b0c0d0e0f", MIG: true, ComputeCapability: [2]int{9, 0}, TotalMemory: 80 << 30},
			{Ordinal: 2, Err: faulted},
		}},
		free: map[int]uint64{0: 70 << 30},
		errs: map[int]error{1: busy},
	}
	out, code, _ := devicesExec(t, src, nil)
	for _, want := range []string{
		"Devices: 3 visible",
		"cuda:0  NVIDIA H100 80GB HBM3\n          compute capability 9.0, memory 80.0 GiB total, 70.0 GiB free",
		"cuda:1  NVIDIA H100 80GB HBM3\n          compute capability 9.0, memory 80.0 GiB total, free unknown",
		"MIG-00010203-0405-0607-0809-0a0b0c0d0e0f\n          error: free memory unknown: cuda: cuDevicePrimaryCtxRetain failed: the GPU is busy",
		"cuda:2  (cannot be described)\n          error: cuda: cuDeviceGetName failed: an unknown internal driver error (CUDA_ERROR_UNKNOWN, code 999)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != exitOK {
		t.Errorf("exit %d", code)
	}
	out, _, _ = devicesExec(t, src, nil, "--json")
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Error != nil || len(rep.Devices) != 3 {
		t.Fatalf("report: %s", out)
	}
	d0, d1, d2 := rep.Devices[0], rep.Devices[1], rep.Devices[2]
	if d0.Error != nil || d0.FreeMemoryBytes == nil || *d0.FreeMemoryBytes != 70<<30 || d0.MIG {
		t.Errorf("cuda:0: %+v", d0)
	}
	if d1.Error == nil || d1.Error.Kind != "cuda" || d1.Error.Code != 46 || d1.Error.Op != "cuDevicePrimaryCtxRetain" || d1.FreeMemoryBytes != nil ||
		!d1.MIG || d1.TotalMemoryBytes != 80<<30 {
		t.Errorf("cuda:1: %+v %+v", d1, d1.Error)
	}
	if d2.Error == nil || d2.Error.Code != 999 || d2.Name != "" || d2.ComputeCapability != "" {
		t.Errorf("cuda:2: %+v", d2)
	}
	var raw struct {
		Devices []map[string]any `json:"devices"`
	}
	json.Unmarshal([]byte(out), &raw)
	if v, ok := raw.Devices[1]["free_memory_bytes"]; !ok || v != nil {
		t.Errorf("free_memory_bytes of the busy GPU: %v, present %v", v, ok)
	}
}

// TestDevicesMIGFromEnvironment: where the driver cannot tell a MIG
// instance apart, the MIG entry of CUDA_VISIBLE_DEVICES does.
func TestDevicesMIGFromEnvironment(t *testing.T) {
	out, _, _ := devicesExec(t, devicesTwoGPUs, map[string]string{"CUDA_VISIBLE_DEVICES": "MIG-5c2f3b1a-0000-4d3e-9a61-7e0f6a1b2c3d"}, "--json")
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Devices[0].MIG || rep.Devices[0].UUID != "MIG-8932f937-d72c-4106-c12f-20bd9faed9f6" || rep.Devices[1].MIG || !strings.HasPrefix(rep.Devices[1].UUID, "GPU-") {
		t.Errorf("devices: %+v", rep.Devices)
	}
}

func TestDevicesDriverWithoutGPU(t *testing.T) {
	noDev := &cuda.CUDAError{Code: 100, Name: "CUDA_ERROR_NO_DEVICE", Op: "cuInit", Meaning: "the driver found no CUDA-capable GPU", Hint: "check CUDA_VISIBLE_DEVICES"}
	src := devicesFake{info: cuda.DriverInfo{CUDAVersion: 12080}, drvErr: noDev}
	out, code, _ := devicesExec(t, src, map[string]string{"CUDA_VISIBLE_DEVICES": ""})
	for _, want := range []string{"NVIDIA driver: release unknown (supports CUDA 12.8)", "Devices: none visible", "CUDA_ERROR_NO_DEVICE", "hides every GPU",
		"no NVIDIA kernel module is loaded"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != exitOK {
		t.Errorf("exit %d", code)
	}
	out, _, _ = devicesExec(t, src, nil, "--json")
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Driver.Found || rep.Error == nil || rep.Error.Kind != "no_device" || rep.Error.Code != 100 || rep.Error.Op != "cuInit" || rep.Devices == nil {
		t.Errorf("report: %+v %+v", rep, rep.Error)
	}
	// A failure while listing (after a good cuInit) is reported the same way.
	src = devicesFake{info: cuda.DriverInfo{CUDAVersion: 13000}, devErr: errors.New("boom")}
	if out, code, _ := devicesExec(t, src, nil); code != exitOK || !strings.Contains(out, "boom") {
		t.Errorf("listing failure: exit %d\n%s", code, out)
	}
}

// TestDevicesReleaseSource: where the release came from, the library
// file and whether a kernel module is loaded are reported in text and
// JSON; the kernel-module line explains an empty list only.
func TestDevicesReleaseSource(t *testing.T) {
	noDev := &cuda.CUDAError{Code: 100, Name: "CUDA_ERROR_NO_DEVICE", Op: "cuInit", Meaning: "the driver found no CUDA-capable GPU"}
	lib := "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.535.261.03"
	src := devicesFake{info: cuda.DriverInfo{CUDAVersion: 12020, Release: "535.261.03", ReleaseSource: cuda.ReleaseLibraryFile, Library: lib}, drvErr: noDev}
	out, code, _ := devicesExec(t, src, nil)
	want := "NVIDIA driver: 535.261.03 (supports CUDA 12.2)\n  library " + lib + "\n" +
		"  release from the library's file name (the user-space driver; no kernel module reported one)\n" +
		"  no NVIDIA kernel module is loaded (/proc/driver/nvidia/version is missing): the driver's library is installed, but no GPU driver is running " +
		"(a machine without a GPU, or a container started without GPUs: docker run --gpus all)\n\nDevices: none visible\n"
	if code != exitOK || !strings.HasPrefix(out, want) {
		t.Errorf("exit %d, text\n%s\nwant prefix\n%s", code, out, want)
	}
	out, _, _ = devicesExec(t, src, nil, "--json")
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if d := rep.Driver; !d.Found || d.Release != "535.261.03" || d.ReleaseSource != "library_file" || d.Library != lib || d.KernelModule || d.CUDAVersion != "12.2" {
		t.Errorf("driver %+v", d)
	}
	// With a kernel module and GPUs: its release, no extra lines.
	two := devicesTwoGPUs
	two.info.ReleaseSource, two.info.KernelModule = cuda.ReleaseKernelModule, true
	out, _, _ = devicesExec(t, two, nil)
	if !strings.HasPrefix(out, "NVIDIA driver: 580.65.06 (supports CUDA 13.0)\n\nDevices: 2 visible\n") {
		t.Errorf("text\n%s", out)
	}
	two.info.ReleaseSource = cuda.ReleaseNVML
	if out, _, _ = devicesExec(t, two, nil); !strings.HasPrefix(out, "NVIDIA driver: 580.65.06 (supports CUDA 13.0)\n  release from NVML\n\nDevices: 2 visible\n") {
		t.Errorf("text\n%s", out)
	}
}

func TestDevicesWriteFailure(t *testing.T) {
	err := runDevices(context.Background(), devicesFailWriter{}, devicesOptions{}, devicesTwoGPUs, cuda.Env{})
	if err == nil || reportError(io.Discard, err) != exitError {
		t.Errorf("write failure: %v", err)
	}
}

type devicesFailWriter struct{}

func (devicesFailWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestDevicesRealBinding runs the real driver binding through the root
// command. On a machine without a driver (like CI) it must report that
// cleanly and exit 0; on a GPU machine it must list the driver.
func TestDevicesRealBinding(t *testing.T) {
	t.Setenv(envLibCUDA, "") // the system's driver, whatever the caller's environment says
	_, openErr := cuda.Open()
	noDriver := errors.Is(openErr, cuda.ErrNoDriver)
	for _, args := range [][]string{{"devices"}, {"devices", "--json"}} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, newStreams(strings.NewReader(""), &out, &errb))
		if code != exitOK || errb.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		if len(args) == 1 {
			if noDriver && !strings.Contains(out.String(), "NVIDIA driver: not found\n  cuda: no NVIDIA driver is installed") {
				t.Errorf("no-driver text:\n%s", out.String())
			}
			if !noDriver && !strings.Contains(out.String(), "NVIDIA driver: ") {
				t.Errorf("driver text:\n%s", out.String())
			}
			continue
		}
		var rep devicesReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if noDriver && (rep.Driver.Found || rep.Error == nil || rep.Error.Kind != "no_driver" || len(rep.Devices) != 0) {
			t.Errorf("no-driver JSON: %s", out.String())
		}
		if !noDriver && !rep.Driver.Found {
			t.Errorf("driver JSON: %s", out.String())
		}
	}
}
