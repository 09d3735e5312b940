package devicecopy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
)

// The tests in this file inject into the fake libcuda the failures a real
// driver produces (see the comment at the top of testdata/fakecuda.c).

// TestUploadStagingAllocFails fails cuMemHostAlloc on the second and third
// staging buffer: the buffers allocated before must be freed, and the
// error must speak of page-locked host memory, not the GPU's.
func TestUploadStagingAllocFails(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, nth := range []int32{1, 2, 3} {
		ck := openCk(t, bigModel(t))
		before := snapshot(t, d)
		fakeHook.failNth(failMemHostAlloc, nth, 2)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithStaging(3, 64<<10))
		fakeHook.failNth(failMemHostAlloc, 0, 0)
		if !errors.Is(err, ErrHostMemory) || errors.Is(err, ErrOutOfMemory) {
			t.Errorf("buffer %d: err = %v", nth, err)
		}
		var ce *CUDAError
		if !errors.As(err, &ce) || ce.Op != "cuMemHostAlloc" || strings.Contains(err.Error(), "GPU") ||
			!strings.Contains(err.Error(), "page-lock") || !strings.Contains(err.Error(), "ulimit -l") {
			t.Errorf("buffer %d: message %q", nth, err)
		}
		checkReleased(t, d, before)
	}
}

// TestUploadDeviceAllocFails fails cuMemAlloc at the first and second
// arena of a two-device plan.
func TestUploadDeviceAllocFails(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, nth := range []int32{1, 2} {
		ck := openCk(t, fixtureDir+"cuda_tagged.pt")
		before := snapshot(t, d)
		fakeHook.failNth(failMemAlloc, nth, 2)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.Rules{}), WithDriver(d))
		fakeHook.failNth(failMemAlloc, 0, 0)
		if !errors.Is(err, ErrOutOfMemory) || errors.Is(err, ErrHostMemory) || !strings.Contains(err.Error(), "the GPU does not have enough free memory") {
			t.Errorf("arena %d: err = %v", nth, err)
		}
		checkReleased(t, d, before)
	}
}

// TestUploadJITRefused: on a GPU the fat binary has no cubin for (compute
// capability 12.0, Blackwell), a driver that will not compile the checksum
// PTX makes a plain-words *VerifyUnavailableError that says how to go on;
// with WithoutVerify the module is never loaded and the upload succeeds.
func TestUploadJITRefused(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fakeHook.configure(2, 0)
	fakeHook.cc(0, 12, 0)
	for _, code := range []int32{218, 221, 222, 223} {
		fakeHook.jit(code)
		ck := openCk(t, fixtureDir+"zip_basic.pt")
		before := snapshot(t, d)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
		var vu *VerifyUnavailableError
		var ce *CUDAError
		if !errors.As(err, &vu) || !errors.Is(err, ErrVerifyUnavailable) || !errors.Is(err, ErrBadKernel) ||
			!errors.As(err, &ce) || ce.Code != int(code) || vu.Device != cuda0 {
			t.Fatalf("code %d: err = %v", code, err)
		}
		for _, want := range []string{"verification cannot run on cuda:0 on this machine", "--no-verify", ce.Name} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("code %d: message %q lacks %q", code, err, want)
			}
		}
		checkReleased(t, d, before)

		modules := fakeHook.modules()
		st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithoutVerify())
		if err != nil {
			t.Fatalf("code %d, without verification: %v", code, err)
		}
		if fakeHook.modules() != modules {
			t.Errorf("code %d: a module was loaded without verification", code)
		}
		for _, ds := range st.Storages {
			if got := digest.SumBytes(deviceBytes(t, d, 0, ds.Ptr, ds.Storage.NBytes)); got != ds.UploadDigest {
				t.Errorf("code %d: storage %s on the device hashes to %v, want %v", code, ds.Storage.Key, got, ds.UploadDigest)
			}
		}
		if err := st.Verify(context.Background()); !errors.Is(err, ErrVerifyUnavailable) {
			t.Errorf("code %d: Verify later: %v", code, err)
		}
		st.Close()
		checkReleased(t, d, before)
	}
	fakeHook.jit(0)
}

// TestUploadKernelSelection: the driver picks from the fat binary what
// the GPU runs: a cubin for Turing to Hopper (even with the PTX JIT
// refused), the PTX JIT beyond, and nothing for a GPU older than sm_75
// (V100), which gets *VerifyUnavailableError with CUDA_ERROR_NO_BINARY_FOR_GPU.
func TestUploadKernelSelection(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fakeHook.configure(2, 0)
	for _, c := range []struct {
		major, minor int32
		jit          bool // the PTX is JIT-compiled, not a cubin loaded
		refused      int32
	}{
		{9, 0, false, 221}, {8, 0, false, 223}, {8, 6, false, 0}, {8, 7, false, 221}, {8, 9, false, 0},
		{7, 5, false, 221}, {10, 0, true, 0}, {12, 0, true, 0}, {9, 0, false, 0},
	} {
		fakeHook.cc(0, c.major, c.minor)
		fakeHook.jit(c.refused)
		jit, cubins := fakeHook.jitLoads(), fakeHook.cubins()
		ck := openCk(t, fixtureDir+"zip_basic.pt")
		st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
		if err != nil {
			t.Fatalf("%d.%d: %v", c.major, c.minor, err)
		}
		if !st.Verified {
			t.Errorf("%d.%d: not verified", c.major, c.minor)
		}
		st.Close()
		if gotJIT := fakeHook.jitLoads() - jit; (gotJIT == 1) != c.jit || fakeHook.cubins()-cubins+gotJIT != 1 {
			t.Errorf("%d.%d: %d JIT loads, %d cubin loads", c.major, c.minor, gotJIT, fakeHook.cubins()-cubins)
		}
	}
	fakeHook.cc(0, 7, 0)
	fakeHook.jit(0)
	ck := openCk(t, fixtureDir+"zip_basic.pt")
	before := snapshot(t, d)
	_, err = Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
	var ce *CUDAError
	if !errors.Is(err, ErrVerifyUnavailable) || !errors.As(err, &ce) || ce.Code != 209 ||
		!strings.Contains(err.Error(), "compute capability 7.5 (Turing) and newer only") {
		t.Errorf("sm_70: %v", err)
	}
	checkReleased(t, d, before)
}

// TestDevicesOneBad: one GPU that fails does not hide the others, and
// listing creates no context.
func TestDevicesOneBad(t *testing.T) {
	d, err := fakeDriver(t, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	fakeHook.failCtx(1, 46) // busy in exclusive-process mode
	fakeHook.failAttr(2, 999)
	devs, err := d.Devices(context.Background())
	if err != nil || len(devs) != 3 {
		t.Fatalf("Devices: %d, %v", len(devs), err)
	}
	if devs[0].Err != nil || devs[0].Name != "Fake GPU 0" || devs[1].Err != nil || devs[1].Name != "Fake GPU 1" || devs[1].FreeKnown {
		t.Errorf("working devices: %+v", devs[:2])
	}
	var ce *CUDAError
	if !errors.As(devs[2].Err, &ce) || ce.Code != 999 || devs[2].Ordinal != 2 {
		t.Errorf("failing device: %+v", devs[2])
	}
	for i := range 3 {
		if r := fakeHook.refs(int32(i)); r != 0 {
			t.Errorf("device %d: listing retained its context %d times", i, r)
		}
	}
	if _, err := d.FreeMemory(context.Background(), 1); !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_DEVICE_UNAVAILABLE" {
		t.Errorf("FreeMemory on the busy GPU: %v", err)
	}

	// Pre-flight judges only the plan's devices.
	ck := openCk(t, fixtureDir+"zip_basic.pt")
	rep, err := Preflight(context.Background(), planFor(t, ck, remap.To(cuda0)), d, Env{})
	if err != nil || !rep.Targets[0].Known || rep.Targets[0].Free == 0 {
		t.Fatalf("plan on cuda:0: %+v, %v", rep, err)
	}
	for i := range 3 {
		if r := fakeHook.refs(int32(i)); r != 0 {
			t.Errorf("device %d: pre-flight left its context retained %d times", i, r)
		}
	}
	_, err = Preflight(context.Background(), planFor(t, ck, remap.To(remap.Device{Type: "cuda", Index: 1})), d, Env{})
	var de *DeviceError
	if !errors.As(err, &de) || !errors.Is(err, ErrPreflightDevice) || len(de.Failed) != 1 || de.Failed[0].Ordinal != 1 ||
		!strings.Contains(err.Error(), "cuda:1 (Fake GPU 1)") || !strings.Contains(err.Error(), "exclusive-process") {
		t.Errorf("plan on the busy GPU: %v", err)
	}
}

// TestPreflightCountsOverhead: with exactly the storage bytes free, the
// arena's padding, checksums and the module do not fit: pre-flight must
// say so rather than let cuMemAlloc fail. With DeviceNeed free, the
// upload succeeds.
func TestPreflightCountsOverhead(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	ck := openCk(t, bigModel(t))
	plan := planFor(t, ck, remap.To(cuda0))
	u := plan.Devices()[0]
	fakeHook.setFree(0, uint64(u.Bytes))
	_, err = Preflight(context.Background(), plan, d, Env{})
	var me *MemoryError
	if !errors.As(err, &me) || me.Short[0].Data != u.Bytes || me.Short[0].Needed != DeviceNeed(u) || me.Short[0].Free != uint64(u.Bytes) {
		t.Fatalf("raw bytes free: %v", err)
	}
	// The arena alone would not fit either: pre-flight was right.
	if _, err := Upload(context.Background(), ck, plan, WithDriver(d)); !errors.Is(err, ErrOutOfMemory) {
		t.Errorf("upload with raw bytes free: %v", err)
	}
	fakeHook.setFree(0, uint64(DeviceNeed(u)))
	if _, err := Preflight(context.Background(), plan, d, Env{}); err != nil {
		t.Fatalf("DeviceNeed free: %v", err)
	}
	st, err := Upload(context.Background(), ck, plan, WithDriver(d))
	if err != nil {
		t.Fatalf("upload after pre-flight passed: %v", err)
	}
	st.Close()
	fakeHook.setFree(0, 0)
}

// TestMIGUUID: a MIG instance prints as nvidia-smi prints it.
func TestMIGUUID(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	fakeHook.mig(1, 1)
	defer fakeHook.mig(1, 0)
	devs, err := d.Devices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if devs[0].MIG || devs[0].UUID != "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f" {
		t.Errorf("GPU: %+v", devs[0])
	}
	if !devs[1].MIG || devs[1].UUID != "MIG-90919293-9495-9697-9899-9a9b9c9d9e9f" {
		t.Errorf("MIG instance: %+v", devs[1])
	}
}

// TestElapsedOptional: a driver without cuEventElapsedTime (CUDA 13's
// header declares only _v2; production never times) still loads; with only
// _v2, that is used.
func TestElapsedOptional(t *testing.T) {
	if _, err := fakeDriver(t, 2, 0); err != nil { // skips without a C compiler
		t.Fatal(err)
	}
	for _, c := range []struct {
		define string
		want   float32
	}{{"-DFAKE_ONLY_V2_ELAPSED", 2.5}, {"-DFAKE_NO_ELAPSED", 0}} {
		lib, err := buildFake(t, t.TempDir(), c.define)
		if err != nil {
			t.Fatal(err)
		}
		a, err := loadLibrary(lib)
		if err != nil {
			t.Fatalf("%s: %v", c.define, err)
		}
		// The variant shares no state with the fake the other tests use:
		// open it and time two events on its own context.
		d, err := open(a)
		if err != nil {
			t.Fatal(err)
		}
		ctx, err := d.PrimaryContext(0)
		if err != nil {
			t.Fatal(err)
		}
		e, err := ctx.NewEvent(0)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := ctx.ElapsedMillis(e, e)
		if c.want != 0 && (err != nil || ms != c.want) {
			t.Errorf("%s: %v, %v", c.define, ms, err)
		}
		if c.want == 0 && !errors.Is(err, ErrDriverTooOld) {
			t.Errorf("%s: %v", c.define, err)
		}
		ctx.DestroyEvent(e)
		ctx.Release()
	}
}
