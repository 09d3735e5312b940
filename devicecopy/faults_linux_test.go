package devicecopy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/fakecuda"
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
		fake.FailNth(fakecuda.FailMemHostAlloc, nth, 2)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithStaging(3, 64<<10))
		fake.FailNth(fakecuda.FailMemHostAlloc, 0, 0)
		if !errors.Is(err, cuda.ErrHostMemory) || errors.Is(err, cuda.ErrOutOfMemory) {
			t.Errorf("buffer %d: err = %v", nth, err)
		}
		var ce *cuda.CUDAError
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
		fake.FailNth(fakecuda.FailMemAlloc, nth, 2)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.Rules{}), WithDriver(d))
		fake.FailNth(fakecuda.FailMemAlloc, 0, 0)
		if !errors.Is(err, cuda.ErrOutOfMemory) || errors.Is(err, cuda.ErrHostMemory) || !strings.Contains(err.Error(), "the GPU does not have enough free memory") {
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
	defer fake.Configure(2, 0)
	fake.CC(0, 12, 0)
	for _, code := range []int32{218, 221, 222, 223} {
		fake.JIT(code)
		ck := openCk(t, fixtureDir+"zip_basic.pt")
		before := snapshot(t, d)
		_, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
		var vu *VerifyUnavailableError
		var ce *cuda.CUDAError
		if !errors.As(err, &vu) || !errors.Is(err, ErrVerifyUnavailable) || !errors.Is(err, cuda.ErrBadKernel) ||
			!errors.As(err, &ce) || ce.Code != int(code) || vu.Device != cuda0 {
			t.Fatalf("code %d: err = %v", code, err)
		}
		for _, want := range []string{"verification cannot run on cuda:0 on this machine", "--no-verify", ce.Name} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("code %d: message %q lacks %q", code, err, want)
			}
		}
		checkReleased(t, d, before)

		modules := fake.Modules()
		st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithoutVerify())
		if err != nil {
			t.Fatalf("code %d, without verification: %v", code, err)
		}
		if fake.Modules() != modules {
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
	fake.JIT(0)
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
	defer fake.Configure(2, 0)
	for _, c := range []struct {
		major, minor int32
		jit          bool // the PTX is JIT-compiled, not a cubin loaded
		refused      int32
	}{
		{9, 0, false, 221}, {8, 0, false, 223}, {8, 6, false, 0}, {8, 7, false, 221}, {8, 9, false, 0},
		{7, 5, false, 221}, {10, 0, true, 0}, {12, 0, true, 0}, {9, 0, false, 0},
	} {
		fake.CC(0, c.major, c.minor)
		fake.JIT(c.refused)
		jit, cubins := fake.JITLoads(), fake.CubinLoads()
		ck := openCk(t, fixtureDir+"zip_basic.pt")
		st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
		if err != nil {
			t.Fatalf("%d.%d: %v", c.major, c.minor, err)
		}
		if !st.Verified {
			t.Errorf("%d.%d: not verified", c.major, c.minor)
		}
		st.Close()
		if gotJIT := fake.JITLoads() - jit; (gotJIT == 1) != c.jit || fake.CubinLoads()-cubins+gotJIT != 1 {
			t.Errorf("%d.%d: %d JIT loads, %d cubin loads", c.major, c.minor, gotJIT, fake.CubinLoads()-cubins)
		}
	}
	fake.CC(0, 7, 0)
	fake.JIT(0)
	ck := openCk(t, fixtureDir+"zip_basic.pt")
	before := snapshot(t, d)
	_, err = Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
	var ce *cuda.CUDAError
	if !errors.Is(err, ErrVerifyUnavailable) || !errors.As(err, &ce) || ce.Code != 209 ||
		!strings.Contains(err.Error(), "compute capability 7.5 (Turing) and newer only") {
		t.Errorf("sm_70: %v", err)
	}
	checkReleased(t, d, before)
}

// TestPreflightBusyDevice: pre-flight judges only the plan's devices, so
// a GPU busy in exclusive-process mode fails a plan that uses it, and no
// other; it leaves no context retained.
func TestPreflightBusyDevice(t *testing.T) {
	d, err := fakeDriver(t, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	fake.FailCtx(1, 46) // busy in exclusive-process mode
	fake.FailAttr(2, 999)
	ck := openCk(t, fixtureDir+"zip_basic.pt")
	rep, err := Preflight(context.Background(), planFor(t, ck, remap.To(cuda0)), d, cuda.Env{})
	if err != nil || !rep.Targets[0].Known || rep.Targets[0].Free == 0 {
		t.Fatalf("plan on cuda:0: %+v, %v", rep, err)
	}
	for i := range 3 {
		if r := fake.Refs(int32(i)); r != 0 {
			t.Errorf("device %d: pre-flight left its context retained %d times", i, r)
		}
	}
	_, err = Preflight(context.Background(), planFor(t, ck, remap.To(remap.Device{Type: "cuda", Index: 1})), d, cuda.Env{})
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
	fake.SetFree(0, uint64(u.Bytes))
	_, err = Preflight(context.Background(), plan, d, cuda.Env{})
	var me *MemoryError
	if !errors.As(err, &me) || me.Short[0].Data != u.Bytes || me.Short[0].Needed != DeviceNeed(u) || me.Short[0].Free != uint64(u.Bytes) {
		t.Fatalf("raw bytes free: %v", err)
	}
	// The arena alone would not fit either: pre-flight was right.
	if _, err := Upload(context.Background(), ck, plan, WithDriver(d)); !errors.Is(err, cuda.ErrOutOfMemory) {
		t.Errorf("upload with raw bytes free: %v", err)
	}
	fake.SetFree(0, uint64(DeviceNeed(u)))
	if _, err := Preflight(context.Background(), plan, d, cuda.Env{}); err != nil {
		t.Fatalf("DeviceNeed free: %v", err)
	}
	st, err := Upload(context.Background(), ck, plan, WithDriver(d))
	if err != nil {
		t.Fatalf("upload after pre-flight passed: %v", err)
	}
	st.Close()
	fake.SetFree(0, 0)
}
