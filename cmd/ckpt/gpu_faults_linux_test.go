package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// faultsOf returns the fault injection of the fake libcuda that fakeCUDA
// built: dlopen of the same path returns the library the command under
// test loads, so the faults set here are the ones it meets. They are
// cleared when the test ends.
func faultsOf(t *testing.T, env map[string]string) *fakecuda.Fake {
	t.Helper()
	f := fakecuda.Load(t)
	if f.Path != env[envLibCUDA] {
		t.Fatalf("%s=%s is not the fake's library %s", envLibCUDA, env[envLibCUDA], f.Path)
	}
	f.Configure(2, 0)
	t.Cleanup(func() { f.Configure(2, 0) })
	return f
}

// TestDevicesFakeLibrary: `ckpt devices` honours CKPT_LIBCUDA, and a GPU
// whose context cannot be created (busy in exclusive-process mode) is
// listed with its error beside the working one.
func TestDevicesFakeLibrary(t *testing.T) {
	env := fakeCUDA(t)
	faultsOf(t, env).FailCtx(1, 46)
	out, code, errs := devicesExec(t, cuda.System{}, env, "--json")
	if code != exitOK || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep devicesReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Error != nil || rep.Driver.CUDAVersion != "13.0" || len(rep.Devices) != 2 {
		t.Fatalf("report: %s", out)
	}
	d0, d1 := rep.Devices[0], rep.Devices[1]
	if d0.Name != "Fake GPU 0" || d0.Error != nil || d0.FreeMemoryBytes == nil || *d0.FreeMemoryBytes != 79<<30 {
		t.Errorf("cuda:0: %+v", d0)
	}
	if d1.Name != "Fake GPU 1" || d1.Error == nil || d1.Error.Name != "CUDA_ERROR_DEVICE_UNAVAILABLE" || d1.FreeMemoryBytes != nil ||
		d1.UUID != "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f" {
		t.Errorf("cuda:1: %+v %+v", d1, d1.Error)
	}
}

// TestLoadBusyOtherGPU: a load judges only the GPUs its plan uses.
func TestLoadBusyOtherGPU(t *testing.T) {
	env := fakeCUDA(t)
	faultsOf(t, env).FailCtx(1, 46)
	if rep := loadJSON(t, env, cudaTagged, "--map-location", "cuda:0"); rep.Uploaded == nil || !rep.Uploaded.Verified {
		t.Errorf("upload to the working GPU: %+v", rep.Uploaded)
	}
	_, code, errs := loadExec(t, cuda.System{}, env, cudaTagged, "--map-location", "cuda:1")
	if code != exitError || !strings.Contains(errs, "cuda:1 (Fake GPU 1)") || !strings.Contains(errs, "CUDA_ERROR_DEVICE_UNAVAILABLE") {
		t.Errorf("upload to the busy GPU: exit %d: %s", code, errs)
	}
}

// TestLoadJITRefused: on a GPU the kernel's fat binary has no cubin for
// (compute capability 12.0), without a PTX JIT the load says that
// verification cannot run here and how to go on; --no-verify uploads.
func TestLoadJITRefused(t *testing.T) {
	env := fakeCUDA(t)
	f := faultsOf(t, env)
	f.CC(0, 12, 0)
	f.JIT(221)
	_, code, errs := loadExec(t, cuda.System{}, env, cudaTagged, "--map-location", "cuda:0")
	for _, want := range []string{"verification cannot run on cuda:0 on this machine", "--no-verify", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"} {
		if code != exitError || !strings.Contains(errs, want) {
			t.Errorf("exit %d, stderr lacks %q: %s", code, want, errs)
		}
	}
	rep := loadJSON(t, env, cudaTagged, "--map-location", "cuda:0", "--no-verify")
	if g := rep.Uploaded; g == nil || g.Verify || g.Verified || g.Tensors != 5 {
		t.Errorf("--no-verify: %+v", rep.Uploaded)
	}
}
