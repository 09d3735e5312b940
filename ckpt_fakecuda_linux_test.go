package ckpt_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/internal/fakecuda"
)

// fakeDriver opens the fake libcuda of internal/fakecuda (host memory
// standing for the GPU, the real checksum kernel source run on the host)
// with its default two GPUs.
func fakeDriver(t *testing.T) *cuda.Driver {
	t.Helper()
	f := fakecuda.Load(t)
	f.Configure(2, 0)
	d, err := cuda.OpenLibrary(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// GPU targets are pre-flighted, uploaded and verified through the driver
// given; tensors carry device pointers, and CPU ones host bytes, in one
// Model that one Close frees.
func TestLoadGPUAndHost(t *testing.T) {
	d := fakeDriver(t)
	env := cuda.Environment(func(string) (string, bool) { return "", false })
	var stages = map[ckpt.Stage]bool{}
	m, err := ckpt.Load(context.Background(), fixtures+"cuda_tagged.pt", ckpt.WithMapLocation("cuda:1=cuda:0,cpu=cpu"),
		ckpt.WithDriver(d), ckpt.WithEnv(env), ckpt.WithProgress(func(p ckpt.Progress) { stages[p.Stage] = true }))
	if err != nil {
		t.Fatal(err)
	}
	if m.Device == nil || !m.Device.Verified || m.Host == nil || !stages[ckpt.StageHost] || !stages[ckpt.StageUpload] {
		t.Fatalf("device %+v host %v stages %v", m.Device, m.Host, stages)
	}
	g, _ := m.Tensor("gpu1.weight")
	if p, ok := g.DevicePtr(); !ok || p == 0 || g.Device.String() != "cuda:0" || g.Saved != "cuda:1" {
		t.Errorf("gpu1.weight: %v %v on %v (saved %s)", p, ok, g.Device, g.Saved)
	}
	if _, err := ckpt.View[uint16](g); !errors.Is(err, ckpt.ErrNotOnHost) {
		t.Errorf("host view of a GPU tensor: %v", err)
	}
	s, _ := m.Tensor("stray")
	if v, err := ckpt.View[float32](s); err != nil || len(v) != 1 {
		t.Errorf("stray on the host: %v %v", v, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := g.DevicePtr(); ok {
		t.Error("a device pointer after Close")
	}
	// Without verification the kernel does not run.
	m, err = ckpt.Load(context.Background(), fixtures+"cuda_tagged.pt", ckpt.WithMapLocation("cuda:0"),
		ckpt.WithDriver(d), ckpt.WithEnv(env), ckpt.WithoutVerify())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Device.Verified {
		t.Error("verified with WithoutVerify")
	}
}

// Storage values go to the GPU with the tensors' storages: a storage shared
// with a tensor is uploaded once, each value's device pointer holds its
// bytes, and the on-device verification covers every one.
func TestLoadStorageValuesGPU(t *testing.T) {
	d := fakeDriver(t)
	env := cuda.Environment(func(string) (string, bool) { return "", false })
	host := loadedValues(t, fixtures+"storages.pt")
	m, err := ckpt.Load(context.Background(), fixtures+"storages.pt", ckpt.WithMapLocation("cuda:1"),
		ckpt.WithDriver(d), ckpt.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Device == nil || !m.Device.Verified || len(m.Device.Storages) != 4 || len(m.Device.Values) != 4 || m.Host != nil {
		t.Fatalf("uploaded %+v, host %v", m.Device, m.Host)
	}
	var sum int64
	for _, ds := range m.Device.Storages {
		if ds.DeviceDigest != ds.UploadDigest || ds.Device.String() != "cuda:1" {
			t.Errorf("storage %s: device digest %v, upload %v, on %s", ds.Storage.Key, ds.DeviceDigest, ds.UploadDigest, ds.Device)
		}
		sum += ds.Storage.NBytes
	}
	if sum != m.Device.Bytes || sum != 24+0+6+5 {
		t.Errorf("uploaded %d bytes, storages hold %d", m.Device.Bytes, sum)
	}
	c, err := d.PrimaryContext(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for _, s := range m.Storages {
		p, ok := s.DevicePtr()
		if !ok || s.OnHost() || (p == 0 && s.NBytes > 0) {
			t.Errorf("storage value %q: pointer %v %v", s.Name, p, ok)
			continue
		}
		b := make([]byte, s.NBytes)
		if s.NBytes > 0 {
			if err := c.MemcpyDtoH(b, p); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(b, host[s.Name]) {
			t.Errorf("storage value %q on the GPU: %x, host load %x", s.Name, b, host[s.Name])
		}
	}
	typed, _ := m.Storage("typed")
	tt, _ := m.Tensor("t")
	p, _ := typed.DevicePtr()
	if tp, _ := tt.DevicePtr(); p != tp {
		t.Errorf("typed at %v, t at %v: not one storage", p, tp)
	}
}
