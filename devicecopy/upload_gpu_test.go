//go:build gpu && linux

package devicecopy

// Tests on a real NVIDIA GPU: go test -tags gpu -run GPU -v ./devicecopy
// They use the installed libcuda.so.1 and device 0 (and 1 when present).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
)

func gpuDriver(t *testing.T) *cuda.Driver {
	t.Helper()
	d, err := cuda.Open()
	if err != nil {
		t.Fatalf("the gpu tag needs a working CUDA driver: %v", err)
	}
	return d
}

// holdContext keeps device 0's primary context alive for the test, so that
// cuMemGetInfo before and after an upload compare like with like (the
// context itself takes device memory).
func holdContext(t *testing.T, d *cuda.Driver) *cuda.Context {
	t.Helper()
	c, err := d.PrimaryContext(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Release() })
	return c
}

// warmContext holds device 0's primary context and uploads a small fixture
// once, verified, so that what the driver allocates lazily on a context's
// first kernel launch (about 2 MiB on an H200 with driver 580, kept until
// the context is destroyed) is in place before a test compares free
// memory: what an upload leaks shows up on every upload, not the first.
func warmContext(t *testing.T, d *cuda.Driver) *cuda.Context {
	t.Helper()
	c := holdContext(t, d)
	ck := openCk(t, fixtureDir+"tied.pt")
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return c
}

func freeMem(t *testing.T, c *cuda.Context) uint64 {
	t.Helper()
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	free, _, err := c.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	return free
}

func TestGPUUploadFixtures(t *testing.T) {
	d := gpuDriver(t)
	c := warmContext(t, d)
	for _, name := range []string{"zip_basic.pt", "tied.pt", "zip_bigendian.pt", "zip_deflated.pt", "legacy.pt",
		"training.pt", "quantized.pt", "model.safetensors", "sharded_st", "big"} {
		t.Run(name, func(t *testing.T) {
			path := fixtureDir + name
			if name == "big" {
				path = bigModel(t)
			}
			ck := openCk(t, path)
			before := freeMem(t, c)
			st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithStaging(3, 64<<10))
			if err != nil {
				t.Fatal(err)
			}
			if !st.Verified {
				t.Error("not verified")
			}
			checkState(t, d, ck, st)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if after := freeMem(t, c); after != before {
				t.Errorf("free memory %d before, %d after Close", before, after)
			}
		})
	}
}

// TestGPUCorruption plants damage with cuMemsetD8 after an upload and
// checks that the kernel finds it in the right tensor and chunk.
func TestGPUCorruption(t *testing.T) {
	d := gpuDriver(t)
	c := holdContext(t, d)
	ck := openCk(t, bigModel(t))
	st, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dt, _ := st.Tensor("d.big")
	off := int64(5*digest.ChunkSize + 77)
	b := deviceBytes(t, d, 0, dt.Ptr+cuda.DevicePtr(off), 1)
	if err := c.MemsetD8(dt.Ptr+cuda.DevicePtr(off), b[0]^1, 1); err != nil {
		t.Fatal(err)
	}
	// cuMemsetD8 runs on the legacy NULL stream, which does not order with
	// the non-blocking verify stream: wait for it before verifying.
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	err = st.Verify(context.Background())
	var ve *VerifyError
	if !errors.As(err, &ve) || len(ve.Mismatches) != 1 || !slices.Equal(ve.Mismatches[0].Chunks, []int64{5}) ||
		!slices.Equal(ve.Mismatches[0].Tensors, []string{"d.big"}) || ve.Mismatches[0].Device != cuda0 {
		t.Fatalf("Verify after corruption: %v", err)
	}
	t.Log(err)
	if err := c.MemsetD8(dt.Ptr+cuda.DevicePtr(off), b[0], 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := st.Verify(context.Background()); err != nil {
		t.Errorf("after repair: %v", err)
	}
}

// TestGPUFailureReleases fails uploads after the device allocation and
// compares cuMemGetInfo before and after. (An OOM on a second device is
// tested with the fake driver, TestUploadFailureReleases.)
func TestGPUFailureReleases(t *testing.T) {
	d := gpuDriver(t)
	c := warmContext(t, d)
	rng := rand.New(rand.NewPCG(7, 8))
	big := writeSafetensors(t, map[string][]float32{"w": randomFloats(rng, 64<<20)}) // 256 MiB
	ck := openCk(t, big)
	before := freeMem(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Upload(ctx, ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d), WithUploadProgress(func(done, total int64) {
		if done > total/2 {
			cancel()
		}
	}))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled upload: %v", err)
	}
	if after := freeMem(t, c); after != before {
		t.Errorf("cancelled: free memory %d before, %d after", before, after)
	}

	ck = openCk(t, corruptRecord(t, filepath.Join(fixtureDir, "zip_basic.pt")))
	if _, err := Upload(context.Background(), ck, planFor(t, ck, remap.To(cuda0)), WithDriver(d)); !errors.Is(err, ErrCRC) {
		t.Errorf("damaged file: %v", err)
	}
	if after := freeMem(t, c); after != before {
		t.Errorf("CRC failure: free memory %d before, %d after", before, after)
	}

}

// BenchmarkGPUPinnedHtoD measures the physical limit an upload is judged
// against: cuMemcpyHtoDAsync from page-locked memory (cuMemHostAlloc) to
// device 0, in copies of the staging buffer size (16 MiB) and of 256 MiB,
// queued back to back on one stream. bench/gpu_proof.sh runs it.
func BenchmarkGPUPinnedHtoD(b *testing.B) {
	d, err := cuda.Open()
	if err != nil {
		b.Fatalf("the gpu tag needs a working CUDA driver: %v", err)
	}
	c, err := d.PrimaryContext(0)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Release()
	for _, n := range []int{16 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("%dMiB", n>>20), func(b *testing.B) {
			host, err := c.MemHostAlloc(n, cuda.HostAllocPortable)
			if err != nil {
				b.Fatal(err)
			}
			defer c.MemFreeHost(host)
			rng := rand.New(rand.NewPCG(1, 2)) // not zeros: real data
			for i := 0; i+8 <= n; i += 8 {
				binary.LittleEndian.PutUint64(host[i:], rng.Uint64())
			}
			dev, err := c.MemAlloc(uint64(n))
			if err != nil {
				b.Fatal(err)
			}
			defer c.MemFree(dev)
			s, err := c.NewStream(cuda.StreamNonBlocking)
			if err != nil {
				b.Fatal(err)
			}
			defer c.DestroyStream(s)
			if err := c.MemcpyHtoDAsync(dev, host, s); err != nil { // warm-up
				b.Fatal(err)
			}
			if err := c.SynchronizeStream(s); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(n))
			b.ResetTimer()
			for range b.N {
				if err := c.MemcpyHtoDAsync(dev, host, s); err != nil {
					b.Fatal(err)
				}
			}
			if err := c.SynchronizeStream(s); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
		})
	}
}

// TestGPUPreflightExactFit fills device 0 until about DeviceNeed bytes are
// free: when pre-flight passes, the upload must not fail in cuMemAlloc or
// cuModuleLoadData. It logs what the upload really took, against which
// VerifyReserve is judged.
func TestGPUPreflightExactFit(t *testing.T) {
	d := gpuDriver(t)
	c := holdContext(t, d)
	ck := openCk(t, bigModel(t))
	plan := planFor(t, ck, remap.To(cuda0))
	need := uint64(DeviceNeed(plan.Devices()[0]))
	for slack := uint64(0); slack <= 64<<20; slack += 2 << 20 {
		free := freeMem(t, c)
		if free < need+slack {
			t.Skipf("only %d bytes free", free)
		}
		filler, err := c.MemAlloc(free - need - slack)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Preflight(context.Background(), plan, d, cuda.Env{})
		if errors.Is(err, ErrPreflightMemory) {
			c.MemFree(filler) // allocation rounding left less than asked: leave more room
			continue
		}
		if err != nil {
			c.MemFree(filler)
			t.Fatal(err)
		}
		before := freeMem(t, c)
		st, err := Upload(context.Background(), ck, plan, WithDriver(d))
		if err != nil {
			c.MemFree(filler)
			t.Fatalf("pre-flight passed (%d free, %d needed) but the upload failed: %v", rep.Targets[0].Free, need, err)
		}
		took := before - freeMem(t, c)
		t.Logf("free %d, DeviceNeed %d (storage bytes %d, VerifyReserve %d): the upload took %d bytes of device memory",
			before, need, plan.Devices()[0].Bytes, VerifyReserve, took)
		if took > need {
			t.Errorf("the upload took %d bytes, more than DeviceNeed's %d", took, need)
		}
		st.Close()
		c.MemFree(filler)
		return
	}
	t.Error("pre-flight refused even with 64 MiB of slack above DeviceNeed")
}
