package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
)

// realNoGPU skips unless NVIDIA's own libcuda.so.1 is installed on a
// machine without an NVIDIA kernel module (Debian's non-free libcuda1
// without a GPU, as CI installs it: docs/gpu.md); CKPT_REQUIRE_REAL_LIBCUDA=1
// makes a missing library a failure.
func realNoGPU(t *testing.T) cuda.DriverInfo {
	t.Helper()
	t.Setenv(envLibCUDA, "")
	info, err := cuda.System{}.Driver(context.Background())
	if errors.Is(err, cuda.ErrNoDriver) {
		if os.Getenv("CKPT_REQUIRE_REAL_LIBCUDA") == "1" {
			t.Fatalf("NVIDIA's libcuda.so.1 is required (CKPT_REQUIRE_REAL_LIBCUDA=1): %v", err)
		}
		t.Skipf("no NVIDIA libcuda.so.1 (docs/gpu.md; CKPT_REQUIRE_REAL_LIBCUDA=1 makes this a failure): %v", err)
	}
	if info.KernelModule {
		t.Skip("an NVIDIA kernel module is loaded: these tests are for the library without a GPU")
	}
	return info
}

// TestRealDevicesNoGPU: `ckpt devices` against NVIDIA's library without a
// GPU reports the driver release, CUDA version and library, says plainly
// that there is no GPU and why, and exits 0.
func TestRealDevicesNoGPU(t *testing.T) {
	info := realNoGPU(t)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"devices"}, newStreams(strings.NewReader(""), &out, &errb)); code != exitOK || errb.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	text := out.String()
	t.Logf("ckpt devices:\n%s", text)
	first := "NVIDIA driver: " + info.Release + " (supports CUDA " + info.CUDAVersion.String() + ")\n"
	for _, want := range []string{first, "  library " + info.Library + "\n", "no NVIDIA kernel module is loaded",
		"\nDevices: none visible\n", "CUDA_ERROR_NO_DEVICE, code 100"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if !strings.HasPrefix(text, first) || info.Release == "" || info.CUDAVersion == 0 {
		t.Errorf("driver line: release %q, CUDA %v", info.Release, info.CUDAVersion)
	}
	if strings.HasPrefix(info.Release, "535.") && info.CUDAVersion.String() != "12.2" {
		t.Errorf("driver 535 reports CUDA %v, not 12.2", info.CUDAVersion)
	}
	out.Reset()
	if code := run(context.Background(), []string{"devices", "--json"}, newStreams(strings.NewReader(""), &out, &errb)); code != exitOK || errb.Len() != 0 {
		t.Fatalf("--json: exit %d, stderr %q", code, errb.String())
	}
	var rep devicesReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	d := rep.Driver
	if !d.Found || d.Release != info.Release || d.ReleaseSource != string(info.ReleaseSource) || d.CUDAVersion != info.CUDAVersion.String() ||
		d.Library != info.Library || d.KernelModule || len(rep.Devices) != 0 || rep.Devices == nil {
		t.Errorf("driver/devices: %s", out.String())
	}
	if e := rep.Error; e == nil || e.Kind != "no_device" || e.Code != 100 || e.Name != "CUDA_ERROR_NO_DEVICE" || e.Op != "cuInit" {
		t.Errorf("error: %+v", rep.Error)
	}
}

// TestRealLoadNoGPU: `ckpt load --map-location cuda:0` against NVIDIA's
// library without a GPU stops at the pre-flight with its one-line
// refusal (the missing device, the driver's reason, the map location that
// works) and exit code 1, before reading any tensor; the real binary
// prints the same line on stderr and nothing on stdout.
func TestRealLoadNoGPU(t *testing.T) {
	realNoGPU(t)
	want := "ckpt: devicecopy: pre-flight: cuda:0 does not exist: this process sees no GPU; CUDA_VISIBLE_DEVICES is not set " +
		"(cuda: cuInit failed: the driver found no CUDA-capable GPU (CUDA_ERROR_NO_DEVICE, code 100): " +
		"check that a GPU is installed and that CUDA_VISIBLE_DEVICES does not hide every GPU (an empty value hides all)); " +
		"this map location would work: cpu\n"
	out, code, errs := loadExec(t, cuda.System{}, nil, cudaTagged, "--map-location", "cuda:0")
	if code != exitError || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr\n%s\nwant\n%s", code, out, errs, want)
	}
	// The saved tags (cuda:0 and cuda:1) name both missing devices.
	if _, code, errs := loadExec(t, cuda.System{}, nil, cudaTagged); code != exitError ||
		!strings.HasPrefix(errs, "ckpt: devicecopy: pre-flight: cuda:0 and cuda:1 do not exist: this process sees no GPU") || strings.Count(errs, "\n") != 1 {
		t.Errorf("saved tags: exit %d, stderr %s", code, errs)
	}
	// The binary itself, as a user runs it.
	cmd := exec.Command(buildCLI(t), "load", cudaTagged, "--map-location", "cuda:0")
	cmd.Env = append(os.Environ(), envLibCUDA+"=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitError || stdout.Len() != 0 || stderr.String() != want {
		t.Errorf("binary: %v, stdout %q, stderr\n%s", err, stdout.String(), stderr.String())
	}
}
