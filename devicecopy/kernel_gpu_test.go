//go:build gpu && linux

package devicecopy

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/kernels"
)

// gpuKernelDigests loads image (the fat binary or the bare PTX) on device
// 0, runs xxh64c_chunks over data and returns the chunk digests and how
// long the module load took.
func gpuKernelDigests(t *testing.T, d *cuda.Driver, image, data []byte) ([]uint64, time.Duration) {
	t.Helper()
	c := holdContext(t, d)
	start := time.Now()
	m, err := c.LoadModule(image)
	if err != nil {
		t.Fatalf("cuModuleLoadData: %v", err)
	}
	took := time.Since(start)
	defer c.UnloadModule(m)
	f, err := c.Function(m, kernels.XXH64CChunks)
	if err != nil {
		t.Fatal(err)
	}
	n := uint64(len(data))
	chunks := uint64(digest.ChunkCount(int64(n)))
	// The digests go after the data at an 8-byte aligned offset, as in an
	// arena (arenaAlign): the kernel stores them as 64-bit words, and a
	// misaligned store is CUDA_ERROR_MISALIGNED_ADDRESS, sticky for the
	// whole context.
	outOff := alignUp(n)
	buf, err := c.MemAlloc(outOff + chunks*8)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(buf)
	s, err := c.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.DestroyStream(s)
	pinned, err := c.MemHostAlloc(len(data), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFreeHost(pinned)
	copy(pinned, data)
	if err := c.MemcpyHtoDAsync(buf, pinned, s); err != nil {
		t.Fatal(err)
	}
	p, size, out := uint64(buf), n, uint64(buf)+outOff
	if err := c.Launch(f, [3]uint32{kernels.XXH64CGrid(n), 1, 1}, [3]uint32{kernels.XXH64CBlock, 1, 1}, 0, s,
		unsafe.Pointer(&p), unsafe.Pointer(&size), unsafe.Pointer(&out)); err != nil {
		t.Fatal(err)
	}
	if err := c.SynchronizeStream(s); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, chunks*8)
	if err := c.MemcpyDtoH(raw, cuda.DevicePtr(out)); err != nil {
		t.Fatal(err)
	}
	sums := make([]uint64, chunks)
	for i := range sums {
		sums[i] = *(*uint64)(unsafe.Pointer(&raw[i*8]))
	}
	return sums, took
}

// TestGPUKernelImages runs the checksum kernel from the fat binary (the
// cubin for this GPU, or the PTX JIT where it has none) and from the bare
// PTX (always the driver's JIT) over the same random bytes: both must give
// the host's chunk digests. It logs the module load times (a JIT compile
// against a cubin load; the driver's JIT cache may shorten a repeated run).
func TestGPUKernelImages(t *testing.T) {
	d := gpuDriver(t)
	info, err := d.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	cc := info.ComputeCapability[0]*10 + info.ComputeCapability[1]
	hasCubin := slices.ContainsFunc(kernels.XXH64CArchs[:], func(a int) bool { return a/10 == cc/10 && a <= cc })
	t.Logf("%s, compute capability %d.%d: the fat binary has a cubin for it: %v", info.Name, cc/10, cc%10, hasCubin)
	rng := rand.New(rand.NewPCG(7, 11))
	data := make([]byte, 64<<20+12345)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	want := make([]uint64, digest.ChunkCount(int64(len(data))))
	for i := range want {
		want[i] = digest.ChunkSum(data[i*digest.ChunkSize:min((i+1)*digest.ChunkSize, len(data))], uint64(i))
	}
	for _, img := range []struct {
		name  string
		image []byte
	}{{"fatbin", kernels.XXH64CFatbin}, {"ptx", kernels.XXH64CPTX}} {
		got, took := gpuKernelDigests(t, d, img.image, data)
		t.Logf("%s: module loaded in %v", img.name, took)
		if !slices.Equal(got, want) {
			bad := 0
			for i := range got {
				if got[i] != want[i] {
					bad++
				}
			}
			t.Errorf("%s: %d of %d chunk digests differ from the host's", img.name, bad, len(want))
		}
	}
}

// TestGPUFatbinWithoutJIT loads the fat binary in a child process with
// CUDA_DISABLE_PTX_JIT=1 (the driver reads it at cuInit): on a GPU the fat
// binary has a cubin for, the upload verifies without any JIT; on a newer
// GPU the driver refuses, with CUDA_ERROR_JIT_COMPILATION_DISABLED.
func TestGPUFatbinWithoutJIT(t *testing.T) {
	if os.Getenv("CKPT_FATBIN_CHILD") == "1" {
		d := gpuDriver(t)
		data := make([]byte, 3<<20+5)
		for i := range data {
			data[i] = byte(i * 7)
		}
		got, _ := gpuKernelDigests(t, d, kernels.XXH64CFatbin, data)
		if sum, err := digest.Combine(int64(len(data)), got); err != nil || sum != digest.SumBytes(data) {
			t.Fatalf("digest %v (%v), want %v", sum, err, digest.SumBytes(data))
		}
		return
	}
	d := gpuDriver(t)
	info, err := d.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	cc := info.ComputeCapability[0]*10 + info.ComputeCapability[1]
	hasCubin := slices.ContainsFunc(kernels.XXH64CArchs[:], func(a int) bool { return a/10 == cc/10 && a <= cc })
	cmd := exec.Command(os.Args[0], "-test.run=^TestGPUFatbinWithoutJIT$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "CKPT_FATBIN_CHILD=1", "CUDA_DISABLE_PTX_JIT=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child (CUDA_DISABLE_PTX_JIT=1) on %s, compute capability %d.%d:\n%s", info.Name, cc/10, cc%10, out)
	switch {
	case hasCubin && err != nil:
		t.Errorf("the fat binary needed the JIT on a GPU it has a cubin for: %v", err)
	case !hasCubin && (err == nil || !strings.Contains(string(out), "CUDA_ERROR_JIT_COMPILATION_DISABLED")):
		t.Errorf("no cubin for this GPU, yet the child did not meet the disabled JIT: %v", err)
	}
}
