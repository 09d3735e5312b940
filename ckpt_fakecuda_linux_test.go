package ckpt_test

import (
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
