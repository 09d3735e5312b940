package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/spf13/cobra"
)

const cudaTagged = "../../testdata/fixtures/cuda_tagged.pt"

// loadFakeInventory is a cuda.Inventory with canned answers.
type loadFakeInventory struct {
	devs []cuda.DeviceInfo
	err  error
}

func (f loadFakeInventory) Devices(context.Context) ([]cuda.DeviceInfo, error) {
	return f.devs, f.err
}

var twoBigGPUs = loadFakeInventory{devs: []cuda.DeviceInfo{
	{Ordinal: 0, Name: "NVIDIA H100 80GB HBM3", FreeMemory: 80 << 30},
	{Ordinal: 1, Name: "NVIDIA H100 80GB HBM3", FreeMemory: 80 << 30},
}}

// loadExec runs `load args...` with inv and env, returning stdout, exit
// code and stderr.
func loadExec(t *testing.T, inv cuda.Inventory, env map[string]string, args ...string) (string, int, string) {
	t.Helper()
	return execCommand(func(s *streams) *cobra.Command { return loadCommand(s, inv, devicesEnv(env)) }, args...)
}

func TestLoadDryRunText(t *testing.T) {
	cases := map[string]string{
		"cpu": cudaTagged + `
Map location: cpu

TENSOR       SAVED   TARGET  BYTES
gpu0.weight  cuda:0  cpu     16 B
gpu0.view    cuda:0  cpu     8 B
gpu1.weight  cuda:1  cpu     12 B
gpu1.index   cuda:1  cpu     24 B
stray        cpu     cpu     4 B

Per target device (each storage counted once):
  cpu      56 B in 4 storage(s), 5 tensor(s)

Stray tensors (home: cuda:1, which holds the most bytes; a stray is a CPU tensor, or a tensor on another
accelerator holding under 10% of the bytes or alone among many):
  stray  cpu  4 B

Dry run: no pre-flight, nothing read.
`,
		"cuda:0=cuda:1": cudaTagged + `
Map location: cuda:0=cuda:1

TENSOR       SAVED   TARGET  BYTES
gpu0.weight  cuda:0  cuda:1  16 B
gpu0.view    cuda:0  cuda:1  8 B
gpu1.weight  cuda:1  cuda:1  12 B
gpu1.index   cuda:1  cuda:1  24 B
stray        cpu     cpu     4 B

Per target device (each storage counted once):
  cpu      4 B in 1 storage(s), 1 tensor(s)
  cuda:1   52 B in 3 storage(s), 4 tensor(s)

Stray tensors (home: cuda:1, which holds the most bytes; a stray is a CPU tensor, or a tensor on another
accelerator holding under 10% of the bytes or alone among many):
  stray  cpu  4 B

Dry run: no pre-flight, nothing read.
`,
	}
	for rules, want := range cases {
		// The dry run never asks for devices: a failing inventory is not hit.
		out, code, errs := loadExec(t, loadFakeInventory{err: errors.New("inventory must not be asked")}, nil,
			cudaTagged, "--map-location", rules, "--dry-run")
		if code != exitOK || errs != "" {
			t.Fatalf("%s: exit %d, stderr %q", rules, code, errs)
		}
		if out != want {
			t.Errorf("%s: output\n%s\nwant\n%s", rules, out, want)
		}
	}
}

func TestLoadDryRunJSON(t *testing.T) {
	type entry struct{ Name, Source, Target string }
	cases := []struct {
		rules   string
		targets []string
		devices []loadDeviceJSON
	}{
		{"cpu", []string{"cpu", "cpu", "cpu", "cpu", "cpu"}, []loadDeviceJSON{{Device: "cpu", Bytes: 56, Tensors: 5, Storages: 4}}},
		{"cuda:0=cuda:1", []string{"cuda:1", "cuda:1", "cuda:1", "cuda:1", "cpu"},
			[]loadDeviceJSON{{Device: "cpu", Bytes: 4, Tensors: 1, Storages: 1}, {Device: "cuda:1", Bytes: 52, Tensors: 4, Storages: 3}}},
	}
	for _, c := range cases {
		out, code, errs := loadExec(t, twoBigGPUs, nil, cudaTagged, "--map-location", c.rules, "--dry-run", "--json")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var rep loadReport
		dec := json.NewDecoder(strings.NewReader(out))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rep); err != nil || dec.More() {
			t.Fatalf("%s: not one JSON object: %v\n%s", c.rules, err, out)
		}
		if rep.File != cudaTagged || rep.MapLocation != c.rules || !rep.DryRun || rep.Preflight != nil || rep.Loaded != nil {
			t.Errorf("%s: header %+v", c.rules, rep)
		}
		var got []string
		for _, e := range rep.Plan.Tensors {
			got = append(got, e.Target)
		}
		if !reflect.DeepEqual(got, c.targets) || !reflect.DeepEqual(rep.Plan.Devices, c.devices) {
			t.Errorf("%s: targets %v devices %+v", c.rules, got, rep.Plan.Devices)
		}
		wantStrays := []remap.Stray{
			{Name: "stray", Tag: "cpu", Dominant: "cuda:1", NBytes: 4},
		}
		if !reflect.DeepEqual(rep.Plan.Strays, wantStrays) {
			t.Errorf("%s: strays %+v", c.rules, rep.Plan.Strays)
		}
		if e := rep.Plan.Tensors[0]; (entry{e.Name, e.Source, e.Target}) != (entry{"gpu0.weight", "cuda:0", c.targets[0]}) {
			t.Errorf("%s: first entry %+v", c.rules, e)
		}
	}
}

func TestLoadCPUJSON(t *testing.T) {
	out, code, errs := loadExec(t, loadFakeInventory{err: errors.New("inventory must not be asked")}, nil, cudaTagged, "--map-location", "cpu", "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep loadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.DryRun || rep.Preflight == nil || len(rep.Preflight.Targets) != 1 || rep.Preflight.Targets[0].NeededBytes != 56 || rep.Loaded == nil {
		t.Fatalf("report %+v", rep)
	}
	h := rep.Loaded
	if h.Bytes != 56 || h.Tensors != 5 || h.CRCChecked != 4 || len(h.Storages) != 4 || h.Mapped != 56 {
		t.Errorf("loaded %+v", h)
	}
	// --no-mmap copies: the same report but for mapped.
	out2, code, errs := loadExec(t, loadFakeInventory{err: errors.New("inventory must not be asked")}, nil, cudaTagged, "--map-location", "cpu", "--no-mmap", "--json")
	var rep2 loadReport
	if err := json.Unmarshal([]byte(out2), &rep2); code != exitOK || err != nil {
		t.Fatalf("--no-mmap: exit %d, %v: %s", code, err, errs)
	}
	if h2 := rep2.Loaded; h2.Mapped != 0 || len(h2.Storages) != len(h.Storages) {
		t.Errorf("--no-mmap: loaded %+v", h2)
	} else {
		for i, s := range h2.Storages {
			if s.Mapped || !h.Storages[i].Mapped || s.Digest != h.Storages[i].Digest {
				t.Errorf("storage %d: mapped %+v, copied %+v", i, h.Storages[i], s)
			}
		}
	}
	// Each digest is the xxh64c of the storage's bytes as digest.Sum reads
	// them from the file.
	ck, err := statedict.Open(cudaTagged)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for i, s := range ck.Storages {
		ra, err := s.ReaderAt()
		if err != nil {
			t.Fatal(err)
		}
		d, err := digest.Sum(context.Background(), ra, s.NBytes)
		if err != nil {
			t.Fatal(err)
		}
		js := h.Storages[i]
		if js.Key != s.Key || js.Record != s.Record || js.NBytes != s.NBytes || js.Digest != d.String() || !js.CRCChecked {
			t.Errorf("storage %d: %+v, want key %s digest %v", i, js, s.Key, d)
		}
	}
	if got := h.Storages[0].Tensors; !reflect.DeepEqual(got, []string{"gpu0.weight", "gpu0.view"}) {
		t.Errorf("storage 0 tensors %v", got)
	}
}

func TestLoadCPUText(t *testing.T) {
	out, code, errs := loadExec(t, twoBigGPUs, nil, cudaTagged, "--map-location", "cpu")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"\nPre-flight: passed\n  cpu      needs 56 B, ", "\nLoaded 56 B (4 storages, 5 tensors) into host memory in ",
		"\nCRC32 checked: 4 of 4 storages"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestLoadStrict(t *testing.T) {
	out, code, errs := loadExec(t, twoBigGPUs, nil, cudaTagged, "--map-location", "cpu", "--strict")
	want := `ckpt: --strict: 1 tensor was saved on another device than the rest of the checkpoint (cuda:1): "stray" (cpu, 4 B)` + "\n"
	if code != exitError || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q, stderr\n%s\nwant\n%s", code, out, errs, want)
	}
	// Optimizer step counters on the cpu are not strays.
	if _, code, errs := loadExec(t, twoBigGPUs, nil, "../../testdata/fixtures/cuda_training.pt", "--map-location", "cpu", "--strict"); code != exitOK {
		t.Errorf("cuda_training.pt --strict: exit %d: %s", code, errs)
	}
}

func TestLoadCUDATargets(t *testing.T) {
	// This machine's driver: without one, the no-driver pre-flight error.
	if _, err := cuda.Open(); errors.Is(err, cuda.ErrNoDriver) {
		for _, rules := range []string{"cuda:0", "cuda"} {
			_, code, errs := loadExec(t, cuda.System{}, nil, cudaTagged, "--map-location", rules)
			if code != exitError || !strings.HasPrefix(errs, "ckpt: devicecopy: pre-flight: the plan puts tensors on cuda:0, but CUDA cannot be used on this machine: cuda: no NVIDIA driver is installed") ||
				!strings.Contains(errs, `use the map location "cpu" (ckpt load --map-location cpu)`) {
				t.Errorf("%s: exit %d, stderr %s", rules, code, errs)
			}
		}
	} else {
		t.Logf("a driver is installed here (%v): no-driver case not run against the real driver", err)
	}
	// A 1-GPU box and the saved tags: cuda:1 is missing, with the fix.
	oneGPU := loadFakeInventory{devs: twoBigGPUs.devs[:1]}
	_, code, errs := loadExec(t, oneGPU, nil, cudaTagged)
	want := "ckpt: devicecopy: pre-flight: cuda:1 does not exist: this process sees 1 GPU (cuda:0); CUDA_VISIBLE_DEVICES is not set; this map location would work: cuda:1=cuda:0\n"
	if code != exitError || errs != want {
		t.Errorf("missing device: exit %d, stderr\n%s\nwant\n%s", code, errs, want)
	}
	// CUDA_VISIBLE_DEVICES="" hides every GPU.
	_, code, errs = loadExec(t, loadFakeInventory{err: fmt.Errorf("cuInit: %w", cuda.ErrNoDevice)}, map[string]string{"CUDA_VISIBLE_DEVICES": ""}, cudaTagged, "--map-location", "cuda:1")
	want = `ckpt: devicecopy: pre-flight: cuda:1 does not exist: this process sees no GPU; CUDA_VISIBLE_DEVICES="" hides every GPU (unset it to see them all); this map location would work: cpu` + "\n"
	if code != exitError || errs != want {
		t.Errorf("hidden GPUs: exit %d, stderr\n%s\nwant\n%s", code, errs, want)
	}
	// A pre-flight that passes goes on to the upload, which needs the
	// driver (load_gpu_linux_test.go runs it against a fake one).
}

func TestLoadUsage(t *testing.T) {
	for _, args := range [][]string{{cudaTagged, "--map-location", "cuda1"}, {cudaTagged, "--map-location", "gpu"}, {}, {cudaTagged, "extra"}, {cudaTagged, "--nope"}} {
		var errb bytes.Buffer
		code := run(context.Background(), append([]string{"load"}, args...), newStreams(strings.NewReader(""), &bytes.Buffer{}, &errb))
		if code != exitUsage || !strings.Contains(errb.String(), "(see 'ckpt load --help')") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"load", "no/such/file.pt", "--map-location", "cpu"}, newStreams(strings.NewReader(""), &bytes.Buffer{}, &errb)); code != exitError {
		t.Errorf("missing file: exit %d, %s", code, errb.String())
	}
}
