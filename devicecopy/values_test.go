package devicecopy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// LoadHost loads the storage values a plan sends to the cpu, with the
// tensors' storages, and refuses values that are not the checkpoint's.
func TestLoadHostStorageValues(t *testing.T) {
	ck := openFixture(t, "storage_root.pt")
	if len(ck.Tensors) != 0 || len(ck.Storages) != 1 {
		t.Fatalf("storage_root.pt: %d tensors, %d storages", len(ck.Tensors), len(ck.Storages))
	}
	s := ck.Storages[0]
	plan, err := remap.NewPlan(ck.Tensors, remap.Rules{}, remap.WithStorageValues(remap.StorageValue{Name: "", Storage: s}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := devicecopy.LoadHost(context.Background(), ck, plan)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := res.Value("")
	b, berr := v.Bytes()
	if !ok || berr != nil || string(b) != "\x00\x00\x01\x00\x02\x00\x03\x00" || res.Bytes != 8 || len(res.Storages) != 1 {
		t.Errorf("value %x %v %v, %d bytes read in %d storages", b, ok, berr, res.Bytes, len(res.Storages))
	}
	res.Release()
	if _, err := v.Bytes(); !errors.Is(err, devicecopy.ErrReleased) {
		t.Errorf("after Release: %v", err)
	}

	// Without the value in the plan nothing is read.
	plan, _ = remap.NewPlan(ck.Tensors, remap.Rules{})
	if res, err := devicecopy.LoadHost(context.Background(), ck, plan); err != nil || len(res.Storages) != 0 {
		t.Errorf("no values: %v %v", res, err)
	}

	// A value that is not a storage of ck is a plan mismatch.
	other := &statedict.Storage{Key: "x", NBytes: 4}
	plan, _ = remap.NewPlan(ck.Tensors, remap.Rules{}, remap.WithStorageValues(remap.StorageValue{Name: "x", Storage: other}))
	if _, err := devicecopy.LoadHost(context.Background(), ck, plan); !errors.Is(err, devicecopy.ErrPlanMismatch) {
		t.Errorf("foreign storage value: %v", err)
	}
}

// A damaged storage value is refused with a *CRCError naming the value.
func TestLoadHostStorageValueCRC(t *testing.T) {
	path, _ := corruptRecord(t, fixtures+"storage_root.pt", "storage_root/data/0")
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	plan, err := remap.NewPlan(ck.Tensors, remap.Rules{}, remap.WithStorageValues(remap.StorageValue{Name: "root", Storage: ck.Storages[0]}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = devicecopy.LoadHost(context.Background(), ck, plan)
	var ce *devicecopy.CRCError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `storage value "root"`) {
		t.Errorf("damaged storage value: %v", err)
	}
}

// The pre-flight judges a GPU that only a storage value needs, and its
// suggestion moves that value's tag too.
func TestPreflightStorageValueDevice(t *testing.T) {
	oneGPU := fakeInventory{devs: []cuda.DeviceInfo{gpu(0, "GPU", 80<<30)}}
	s := &statedict.Storage{Key: "v", Location: "cuda:1", NBytes: 8}
	tensors := []*statedict.Tensor{byteTensor("w", "cpu", 4)}
	plan, err := remap.NewPlan(tensors, remap.Rules{}, remap.WithStorageValues(remap.StorageValue{Name: "v", Storage: s}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = devicecopy.Preflight(context.Background(), plan, oneGPU, envOf(nil))
	var me *devicecopy.MissingDeviceError
	if !errors.As(err, &me) || len(me.Missing) != 1 || me.Missing[0].String() != "cuda:1" || me.Suggest != "cuda:1=cuda:0" {
		t.Errorf("storage value on a missing GPU: %v", err)
	}
}
