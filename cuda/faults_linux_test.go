package cuda

import (
	"context"
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// The tests in this file inject into the fake libcuda the failures a real
// driver produces (see the comment at the top of
// internal/fakecuda/testdata/fakecuda.c).

// TestDevicesOneBad: one GPU that fails does not hide the others, and
// listing creates no context.
func TestDevicesOneBad(t *testing.T) {
	d, err := fakeDriver(t, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Configure(2, 0)
	fake.FailCtx(1, 46) // busy in exclusive-process mode
	fake.FailAttr(2, 999)
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
		if r := fake.Refs(int32(i)); r != 0 {
			t.Errorf("device %d: listing retained its context %d times", i, r)
		}
	}
	if _, err := d.FreeMemory(context.Background(), 1); !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_DEVICE_UNAVAILABLE" {
		t.Errorf("FreeMemory on the busy GPU: %v", err)
	}
	if free, err := d.FreeMemory(context.Background(), 0); err != nil || free == 0 {
		t.Errorf("FreeMemory on the working GPU: %d, %v", free, err)
	}
	for i := range 3 {
		if r := fake.Refs(int32(i)); r != 0 {
			t.Errorf("device %d: FreeMemory left its context retained %d times", i, r)
		}
	}
}

// TestMIGUUID: a MIG instance prints as nvidia-smi prints it.
func TestMIGUUID(t *testing.T) {
	d, err := fakeDriver(t, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	fake.MIG(1, 1)
	defer fake.MIG(1, 0)
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
		a, err := loadLibrary(fakecuda.Build(t, t.TempDir(), c.define))
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
