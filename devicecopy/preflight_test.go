package devicecopy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// fakeInventory answers Devices with canned values and counts the calls.
type fakeInventory struct {
	devs  []cuda.DeviceInfo
	err   error
	calls *int
}

func (f fakeInventory) Devices(context.Context) ([]cuda.DeviceInfo, error) {
	if f.calls != nil {
		*f.calls++
	}
	return f.devs, f.err
}

func gpu(ordinal int, name string, free uint64) cuda.DeviceInfo {
	return cuda.DeviceInfo{Ordinal: ordinal, Name: name, TotalMemory: free + 1<<30, FreeMemory: free, FreeKnown: true}
}

func envOf(m map[string]string) cuda.Env {
	return cuda.Environment(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// byteTensor is a uint8 tensor of n bytes on its own storage saved at loc.
func byteTensor(name, loc string, n int64) *statedict.Tensor {
	return &statedict.Tensor{Name: name, DType: dtype.Uint8, Shape: []int64{n}, Strides: []int64{1}, Device: loc,
		Storage: &statedict.Storage{Key: name, Location: loc, DType: dtype.Uint8, NBytes: n}}
}

// taggedTensors is shaped like testdata/fixtures/cuda_tagged.pt: most bytes
// on cuda:0, some on cuda:1, a stray on the cpu.
func taggedTensors() []*statedict.Tensor {
	return []*statedict.Tensor{
		byteTensor("a", "cuda:0", 1000), byteTensor("b", "cuda:1", 300), byteTensor("stray", "cpu", 4),
	}
}

func mustPlan(t *testing.T, tensors []*statedict.Tensor, rules string) *remap.Plan {
	t.Helper()
	var r remap.Rules
	if rules != "" {
		var err error
		if r, err = remap.Parse(rules); err != nil {
			t.Fatal(err)
		}
	}
	p, err := remap.NewPlan(tensors, r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func dev(s string) remap.Device {
	d, err := remap.ParseDevice(s)
	if err != nil {
		panic(err)
	}
	if d.Type == "cpu" {
		d.Index = -1
	}
	return d
}

func TestPreflightMissingDevice(t *testing.T) {
	oneGPU := fakeInventory{devs: []cuda.DeviceInfo{gpu(0, "NVIDIA H100 80GB HBM3", 80<<30)}}
	cases := []struct {
		name, rules string
		env         map[string]string
		inv         fakeInventory
		missing     []remap.Device
		visible     int
		suggest     string
		msg         string
	}{
		{
			name: "saved tags, cuda:1 on a 1-GPU box", inv: oneGPU,
			missing: []remap.Device{dev("cuda:1")}, visible: 1, suggest: "cuda:1=cuda:0",
			msg: "devicecopy: pre-flight: cuda:1 does not exist: this process sees 1 GPU (cuda:0); CUDA_VISIBLE_DEVICES is not set; this map location would work: cuda:1=cuda:0",
		},
		{
			name: "CUDA_VISIBLE_DEVICES renumbers", inv: oneGPU, env: map[string]string{"CUDA_VISIBLE_DEVICES": "3"},
			missing: []remap.Device{dev("cuda:1")}, visible: 1, suggest: "cuda:1=cuda:0",
			msg: `devicecopy: pre-flight: cuda:1 does not exist: this process sees 1 GPU (cuda:0); CUDA_VISIBLE_DEVICES="3" makes only the listed GPUs visible, renumbered from cuda:0; this map location would work: cuda:1=cuda:0`,
		},
		{
			name: "swap rules on a 1-GPU box", rules: "cuda:0=cuda:1,cuda:1=cuda:0", inv: oneGPU,
			missing: []remap.Device{dev("cuda:1")}, visible: 1, suggest: "cuda:1=cuda:0",
		},
		{
			name: "everything to cuda:5 on two GPUs", rules: "cuda:5",
			inv:     fakeInventory{devs: []cuda.DeviceInfo{gpu(0, "A", 80<<30), gpu(1, "B", 80<<30)}},
			missing: []remap.Device{dev("cuda:5")}, visible: 2, suggest: "cuda:1",
			msg: "devicecopy: pre-flight: cuda:5 does not exist: this process sees 2 GPUs (cuda:0 to cuda:1); CUDA_VISIBLE_DEVICES is not set; this map location would work: cuda:1",
		},
		{
			name: "CUDA_VISIBLE_DEVICES empty", env: map[string]string{"CUDA_VISIBLE_DEVICES": ""},
			inv:     fakeInventory{err: fmt.Errorf("cuInit: %w", cuda.ErrNoDevice)},
			missing: []remap.Device{dev("cuda:0"), dev("cuda:1")}, visible: 0, suggest: "cpu",
			msg: `devicecopy: pre-flight: cuda:0 and cuda:1 do not exist: this process sees no GPU; CUDA_VISIBLE_DEVICES="" hides every GPU (unset it to see them all); this map location would work: cpu`,
		},
		{
			name: "driver sees no GPU", inv: fakeInventory{err: fmt.Errorf("cuInit: %w", cuda.ErrNoDevice)},
			missing: []remap.Device{dev("cuda:0"), dev("cuda:1")}, visible: 0, suggest: "cpu",
			msg: "devicecopy: pre-flight: cuda:0 and cuda:1 do not exist: this process sees no GPU; CUDA_VISIBLE_DEVICES is not set (cuInit: cuda: no CUDA-capable device is visible); this map location would work: cpu",
		},
		{
			name: "inventory answers an empty list", inv: fakeInventory{devs: []cuda.DeviceInfo{}},
			missing: []remap.Device{dev("cuda:0"), dev("cuda:1")}, visible: 0, suggest: "cpu",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPlan(t, taggedTensors(), c.rules)
			env := envOf(c.env)
			rep, err := devicecopy.Preflight(context.Background(), plan, c.inv, env)
			if rep != nil {
				t.Errorf("report %+v with an error", rep)
			}
			var me *devicecopy.MissingDeviceError
			if !errors.As(err, &me) {
				t.Fatalf("error %v is not a *MissingDeviceError", err)
			}
			if !errors.Is(err, devicecopy.ErrPreflight) || !errors.Is(err, devicecopy.ErrPreflightMissingDevice) {
				t.Errorf("error %v does not match the sentinels", err)
			}
			if !reflect.DeepEqual(me.Missing, c.missing) || me.Visible != c.visible || me.Suggest != c.suggest {
				t.Errorf("missing %v visible %d suggest %q; want %v %d %q", me.Missing, me.Visible, me.Suggest, c.missing, c.visible, c.suggest)
			}
			if !reflect.DeepEqual(me.Env, env) {
				t.Errorf("env %+v, want %+v", me.Env, env)
			}
			if c.msg != "" && err.Error() != c.msg {
				t.Errorf("message\n got %s\nwant %s", err.Error(), c.msg)
			}
			// The suggestion must work: with it every target exists.
			fixed := mustPlan(t, taggedTensors(), me.Suggest)
			if _, err := devicecopy.Preflight(context.Background(), fixed, fakeInventory{devs: c.inv.devs}, env); err != nil && c.visible > 0 {
				t.Errorf("suggested %q still fails: %v", me.Suggest, err)
			}
			for _, e := range fixed.Entries {
				if e.Target.Type == "cuda" && e.Target.Index >= c.visible {
					t.Errorf("suggested %q sends %s to %s", me.Suggest, e.Name, e.Target)
				}
			}
		})
	}
}

func TestPreflightSuggestKeepsPlacement(t *testing.T) {
	// A bare "cuda" tag goes to cuda:0 (missing); cuda:1 exists and must
	// stay there even though the suggestion has a bare "cuda" key.
	tensors := []*statedict.Tensor{byteTensor("a", "cuda", 10), byteTensor("b", "cuda:1", 10), byteTensor("c", "cpu", 1)}
	plan := mustPlan(t, tensors, "")
	inv := fakeInventory{devs: []cuda.DeviceInfo{gpu(1, "only ordinal 1", 1<<30)}}
	_, err := devicecopy.Preflight(context.Background(), plan, inv, envOf(nil))
	var me *devicecopy.MissingDeviceError
	if !errors.As(err, &me) {
		t.Fatalf("got %v", err)
	}
	if want := "cuda:1=cuda:1,cuda=cuda:1"; me.Suggest != want {
		t.Errorf("suggest %q, want %q", me.Suggest, want)
	}
}

func TestPreflightMemory(t *testing.T) {
	// A GPU needs more than the storage bytes: alignment, checksums and
	// the kernel's reserve (DeviceNeed).
	need0 := devicecopy.DeviceNeed(remap.DeviceUse{Device: dev("cuda:0"), Bytes: 1000, Tensors: 1, Storages: 1})
	need1 := devicecopy.DeviceNeed(remap.DeviceUse{Device: dev("cuda:1"), Bytes: 300, Tensors: 1, Storages: 1})
	if need0 < 1000+256+8+devicecopy.VerifyReserve || need1 < 300+256+8+devicecopy.VerifyReserve {
		t.Fatalf("DeviceNeed: %d and %d", need0, need1)
	}
	inv := fakeInventory{devs: []cuda.DeviceInfo{gpu(0, "NVIDIA H100 80GB HBM3", uint64(need0-1)), gpu(1, "NVIDIA H200", uint64(need1))}}
	plan := mustPlan(t, taggedTensors(), "")
	_, err := devicecopy.Preflight(context.Background(), plan, inv, envOf(nil))
	var me *devicecopy.MemoryError
	if !errors.As(err, &me) || !errors.Is(err, devicecopy.ErrPreflight) || !errors.Is(err, devicecopy.ErrPreflightMemory) {
		t.Fatalf("got %v", err)
	}
	want := []devicecopy.TargetCheck{{Device: dev("cuda:0"), Needed: need0, Data: 1000, Free: uint64(need0 - 1), Known: true, Name: "NVIDIA H100 80GB HBM3"}}
	if !reflect.DeepEqual(me.Short, want) {
		t.Errorf("short %+v, want %+v", me.Short, want)
	}
	msg := fmt.Sprintf("devicecopy: pre-flight: not enough free memory: cuda:0 (NVIDIA H100 80GB HBM3) needs %d bytes (0.01 GiB) but has %d bytes (0.01 GiB) free; free memory there, or send some tensors elsewhere with the map location", need0, need0-1)
	if err.Error() != msg {
		t.Errorf("message\n got %s\nwant %s", err, msg)
	}
	// Exactly enough is enough.
	inv.devs[0].FreeMemory = uint64(need0)
	rep, err := devicecopy.Preflight(context.Background(), plan, inv, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Targets) != 3 || rep.Targets[1] != (devicecopy.TargetCheck{Device: dev("cuda:0"), Needed: need0, Data: 1000, Free: uint64(need0), Known: true, Name: "NVIDIA H100 80GB HBM3"}) ||
		rep.Targets[2] != (devicecopy.TargetCheck{Device: dev("cuda:1"), Needed: need1, Data: 300, Free: uint64(need1), Known: true, Name: "NVIDIA H200"}) ||
		rep.Targets[0].Device != dev("cpu") || rep.Targets[0].Needed != 4 {
		t.Errorf("targets %+v", rep.Targets)
	}
	if len(rep.Devices) != 2 {
		t.Errorf("devices %+v", rep.Devices)
	}
}

// readerInventory is a fakeInventory that measures free memory on demand,
// as cuda.Driver does, and records which devices it was asked about.
type readerInventory struct {
	fakeInventory
	free  map[int]uint64
	errs  map[int]error
	asked *[]int
}

func (r readerInventory) FreeMemory(_ context.Context, ordinal int) (uint64, error) {
	*r.asked = append(*r.asked, ordinal)
	return r.free[ordinal], r.errs[ordinal]
}

// TestPreflightJudgesOnlyTargets: a GPU the plan does not use may be broken
// or busy; a target that is gets a *DeviceError naming it; free memory is
// measured only on targets.
func TestPreflightJudgesOnlyTargets(t *testing.T) {
	busy := fmt.Errorf("cuDevicePrimaryCtxRetain failed: the GPU is busy")
	faulted := errors.New("cuDeviceGetName failed: unknown")
	var asked []int
	inv := readerInventory{
		fakeInventory: fakeInventory{devs: []cuda.DeviceInfo{
			{Ordinal: 0, Name: "GPU A", TotalMemory: 80 << 30},
			{Ordinal: 1, Name: "GPU B", TotalMemory: 80 << 30},
			{Ordinal: 2, Err: faulted},
		}},
		free:  map[int]uint64{0: 70 << 30, 1: 70 << 30},
		errs:  map[int]error{1: busy},
		asked: &asked,
	}
	rep, err := devicecopy.Preflight(context.Background(), mustPlan(t, taggedTensors(), "cuda:0"), inv, envOf(nil))
	if err != nil {
		t.Fatalf("plan on the working GPU: %v", err)
	}
	if !reflect.DeepEqual(asked, []int{0}) || rep.Targets[0].Free != 70<<30 || !rep.Targets[0].Known || !rep.Devices[0].FreeKnown {
		t.Errorf("asked %v, targets %+v", asked, rep.Targets)
	}
	for _, c := range []struct {
		rules string
		want  []int
		cause error
	}{{"cuda:1", []int{1}, busy}, {"cuda:0=cuda:2,cuda:1=cuda:0,cpu=cuda:1", []int{1, 2}, faulted}} {
		_, err = devicecopy.Preflight(context.Background(), mustPlan(t, taggedTensors(), c.rules), inv, envOf(nil))
		var de *devicecopy.DeviceError
		if !errors.As(err, &de) || !errors.Is(err, devicecopy.ErrPreflight) || !errors.Is(err, devicecopy.ErrPreflightDevice) || !errors.Is(err, c.cause) {
			t.Fatalf("%s: got %v", c.rules, err)
		}
		var got []int
		for _, d := range de.Failed {
			got = append(got, d.Ordinal)
		}
		if !reflect.DeepEqual(got, c.want) || !strings.Contains(err.Error(), "cuda:1 (GPU B): cuDevicePrimaryCtxRetain failed: the GPU is busy") {
			t.Errorf("%s: failed %v: %v", c.rules, got, err)
		}
	}
}

func TestPreflightHostMemory(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo: host memory is not checked here")
	}
	calls := 0
	plan := mustPlan(t, []*statedict.Tensor{byteTensor("huge", "cpu", 1<<60)}, "")
	_, err := devicecopy.Preflight(context.Background(), plan, fakeInventory{calls: &calls}, envOf(nil))
	var me *devicecopy.MemoryError
	if !errors.As(err, &me) || len(me.Short) != 1 || me.Short[0].Device != dev("cpu") || me.Short[0].Needed != 1<<60 ||
		!me.Short[0].Known || me.Short[0].Free == 0 || me.Short[0].Free >= 1<<60 {
		t.Fatalf("got %v (%+v)", err, me)
	}
	if !strings.Contains(err.Error(), "cpu needs 1152921504606846976 bytes (1073741824.00 GiB) but has ") {
		t.Errorf("message %s", err)
	}
	if calls != 0 {
		t.Errorf("inventory asked %d times for a cpu-only plan", calls)
	}
	rep, err := devicecopy.Preflight(context.Background(), mustPlan(t, taggedTensors(), "cpu"), fakeInventory{calls: &calls}, envOf(nil))
	if err != nil || calls != 0 || rep.Devices != nil || len(rep.Targets) != 1 || rep.Targets[0].Needed != 1304 || !rep.Targets[0].Known {
		t.Errorf("cpu plan: %+v, %v, %d inventory calls", rep, err, calls)
	}
}

func TestPreflightNoDriver(t *testing.T) {
	noDriver := &cuda.LoadError{Library: "libcuda.so.1", Reason: "libcuda.so.1: cannot open shared object file: No such file or directory", Err: cuda.ErrNoDriver}
	plan := mustPlan(t, taggedTensors(), "cuda:0=cuda:0,cpu=cuda:0,cuda:1=cuda:0")
	_, err := devicecopy.Preflight(context.Background(), plan, fakeInventory{err: noDriver}, envOf(nil))
	var ne *devicecopy.NoCUDAError
	if !errors.As(err, &ne) {
		t.Fatalf("got %v", err)
	}
	for _, target := range []error{devicecopy.ErrPreflight, devicecopy.ErrPreflightNoCUDA, cuda.ErrNoDriver} {
		if !errors.Is(err, target) {
			t.Errorf("error does not match %v", target)
		}
	}
	if !reflect.DeepEqual(ne.Targets, []remap.Device{dev("cuda:0")}) || ne.Err != noDriver {
		t.Errorf("facts %+v", ne)
	}
	msg := `devicecopy: pre-flight: the plan puts tensors on cuda:0, but CUDA cannot be used on this machine: ` +
		`cuda: no NVIDIA driver is installed (libcuda.so.1 could not be loaded): libcuda.so.1: cannot open shared object file: No such file or directory; ` +
		`to load on the CPU instead use the map location "cpu" (ckpt load --map-location cpu)`
	if err.Error() != msg {
		t.Errorf("message\n got %s\nwant %s", err, msg)
	}
}

// On a machine without a GPU driver, the real inventory gives the same answer.
func TestPreflightSystemWithoutDriver(t *testing.T) {
	if _, err := cuda.Open(); !errors.Is(err, cuda.ErrNoDriver) {
		t.Skipf("a driver is installed here (%v)", err)
	}
	_, err := devicecopy.Preflight(context.Background(), mustPlan(t, taggedTensors(), ""), cuda.System{}, envOf(nil))
	var ne *devicecopy.NoCUDAError
	if !errors.As(err, &ne) || !errors.Is(err, cuda.ErrNoDriver) || !reflect.DeepEqual(ne.Targets, []remap.Device{dev("cuda:0"), dev("cuda:1")}) {
		t.Fatalf("got %v", err)
	}
}

func TestPreflightUnsupportedAndCancel(t *testing.T) {
	calls := 0
	_, err := devicecopy.Preflight(context.Background(), mustPlan(t, taggedTensors(), "cuda:1=mps,cpu=meta"), fakeInventory{calls: &calls}, envOf(nil))
	var ue *devicecopy.UnsupportedError
	if !errors.As(err, &ue) || !errors.Is(err, devicecopy.ErrPreflightUnsupported) || !reflect.DeepEqual(ue.Devices, []remap.Device{dev("meta"), dev("mps")}) {
		t.Fatalf("got %v", err)
	}
	if want := "devicecopy: pre-flight: ckpt cannot load to meta and mps: only cpu and cuda targets are supported"; err.Error() != want {
		t.Errorf("message %s", err)
	}
	if calls != 0 {
		t.Error("inventory asked before refusing unsupported targets")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := devicecopy.Preflight(ctx, mustPlan(t, taggedTensors(), ""), fakeInventory{calls: &calls}, envOf(nil)); !errors.Is(err, context.Canceled) || calls != 0 {
		t.Errorf("cancelled: %v, %d calls", err, calls)
	}
}

// Preflight explains, before anything is read, why a GPU checkpoint cannot
// go where it was saved and which map location would work.
func ExamplePreflight() {
	tensors := []*statedict.Tensor{byteTensor("encoder.weight", "cuda:0", 4096), byteTensor("decoder.weight", "cuda:1", 4096)}
	plan, _ := remap.NewPlan(tensors, remap.Rules{}) // map_location=None: keep the saved tags
	var oneGPU cuda.Inventory = fakeInventory{devs: []cuda.DeviceInfo{gpu(0, "NVIDIA H100 80GB HBM3", 80<<30)}}
	_, err := devicecopy.Preflight(context.Background(), plan, oneGPU, envOf(nil))
	var me *devicecopy.MissingDeviceError
	if errors.As(err, &me) {
		fmt.Println("missing:", me.Missing[0], "visible:", me.Visible, "use:", me.Suggest)
	}
	// Output:
	// missing: cuda:1 visible: 1 use: cuda:0
}
