package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// fakeCUDA builds the fake libcuda of internal/fakecuda (whose checksum
// kernel runs the real kernel source on the host), with its default two
// GPUs, and returns the environment that points `ckpt load` at it.
func fakeCUDA(t *testing.T) map[string]string {
	t.Helper()
	f := fakecuda.Load(t)
	f.Configure(2, 0)
	return map[string]string{envLibCUDA: f.Path}
}

func loadJSON(t *testing.T, env map[string]string, args ...string) loadReport {
	t.Helper()
	out, code, errs := loadExec(t, cuda.System{}, env, append(args, "--json")...)
	if code != exitOK {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var rep loadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestLoadCUDAFake(t *testing.T) {
	env := fakeCUDA(t)
	// The host load gives the digests the GPU copies must have.
	cpu := loadJSON(t, nil, cudaTagged, "--map-location", "cpu")
	want := map[string]string{}
	for _, s := range cpu.Loaded.Storages {
		want[s.Key] = s.Digest
	}

	// Saved tags: cuda:0 and cuda:1 upload, the stray cpu tensor loads on the host.
	rep := loadJSON(t, env, cudaTagged)
	g := rep.Uploaded
	if g == nil || !g.Verify || !g.Verified || len(g.Mismatches) != 0 || g.Tensors != 4 || len(g.Devices) != 2 {
		t.Fatalf("uploaded: %+v", g)
	}
	if rep.Loaded == nil || rep.Loaded.Tensors != 1 {
		t.Errorf("the cpu tensor was not loaded on the host: %+v", rep.Loaded)
	}
	for _, s := range g.Storages {
		if s.FileDigest != want[s.Key] || s.UploadDigest != want[s.Key] || s.DeviceDigest != want[s.Key] {
			t.Errorf("storage %s on %s: file %s upload %s device %s, host load %s", s.Key, s.Device, s.FileDigest, s.UploadDigest, s.DeviceDigest, want[s.Key])
		}
	}
	for _, d := range g.Devices {
		if d.Bytes == 0 || d.Storages == 0 {
			t.Errorf("device %+v", d)
		}
	}

	// --no-verify: uploaded, not verified, no device digests.
	rep = loadJSON(t, env, cudaTagged, "--map-location", "cuda:1", "--no-verify")
	if g := rep.Uploaded; g.Verify || g.Verified || len(g.Devices) != 1 || g.Devices[0].Device != "cuda:1" || g.Storages[0].DeviceDigest != "" {
		t.Errorf("--no-verify: %+v", g)
	}

	// Text.
	out, code, errs := loadExec(t, cuda.System{}, env, cudaTagged, "--map-location", "cuda:1=cuda:0")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, w := range []string{"Pre-flight: passed", "Uploaded 52 B (3 storages, 4 tensors) to the GPU", "cuda:0   52 B in 3 storage(s)",
		"Read: ", "Upload: ", "Verify: ", "verified: every byte on the GPU matches the file"} {
		if !strings.Contains(out, w) {
			t.Errorf("text output lacks %q:\n%s", w, out)
		}
	}

	// A library that is not a CUDA driver.
	_, code, errs = loadExec(t, cuda.System{}, map[string]string{envLibCUDA: "/nonexistent/libcuda.so"}, cudaTagged)
	if code != exitError || !strings.Contains(errs, "CKPT_LIBCUDA=/nonexistent/libcuda.so") || !strings.Contains(errs, "no NVIDIA driver") {
		t.Errorf("bad CKPT_LIBCUDA: exit %d, %s", code, errs)
	}
}

// TestLoadCUDASavedDigests: the digests `ckpt convert` records are checked
// against the bytes read during the upload; a tampered one is reported.
func TestLoadCUDASavedDigests(t *testing.T) {
	env := fakeCUDA(t)
	out := filepath.Join(t.TempDir(), "m.safetensors")
	if code, _, errs := runCLI(t, "convert", fx+"training.pt", out); code != exitOK {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	rep := loadJSON(t, env, out, "--map-location", "cuda:0")
	if g := rep.Uploaded; g == nil || !g.Verified || len(g.Mismatches) != 0 {
		t.Fatalf("clean file: %+v", rep.Uploaded)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("xxh64c:"))
	if i < 0 {
		t.Fatal("no digest recorded in the safetensors metadata")
	}
	i += len("xxh64c:")
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, code, _ := loadExec(t, cuda.System{}, env, out, "--map-location", "cuda:0", "--json")
	if code != exitError {
		t.Fatalf("tampered digest: exit %d", code)
	}
	var bad loadReport
	if err := json.Unmarshal([]byte(stdout), &bad); err != nil {
		t.Fatal(err)
	}
	if g := bad.Uploaded; g == nil || g.Verified || len(g.Mismatches) != 1 || g.Mismatches[0].Kind != "saved" {
		t.Fatalf("tampered digest: %+v", bad.Uploaded)
	}
}
