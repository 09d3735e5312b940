package devicecopy

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/kernels"
	"github.com/ckpt-dev/ckpt/remap"
)

// loadKernel loads the checksum kernel's fat binary into the arena's
// context: the driver takes the cubin built for the GPU's architecture
// (sm_75 to sm_90, no JIT) or JIT-compiles the PTX inside it (newer GPUs).
// A driver that refuses it (no cubin fits and the PTX JIT is missing or
// disabled, the PTX too new, a GPU older than sm_75) makes a
// *VerifyUnavailableError.
func (a *Arena) loadKernel() error {
	m, err := a.ctx.LoadModule(kernels.XXH64CFatbin)
	if err != nil {
		if errors.Is(err, cuda.ErrBadKernel) {
			return &VerifyUnavailableError{Device: a.Device, Err: err}
		}
		return err
	}
	a.module = m
	a.kernel, err = a.ctx.Function(m, kernels.XXH64CChunks)
	return err
}

// ErrVerifyUnavailable reports that the on-device checksum kernel cannot
// run on this machine. See *VerifyUnavailableError.
var ErrVerifyUnavailable = errors.New("devicecopy: on-device verification cannot run on this machine")

// VerifyUnavailableError reports that the driver would not load the
// checksum kernel (package kernels ships it as a fat binary: cubins for
// sm_75 to sm_90 and PTX, which the driver's JIT compiles for other GPUs):
// on a GPU without a cubin the JIT compiler is missing or disabled, or the
// PTX is newer than the driver; or the GPU is older than sm_75. The upload itself does not need the kernel: WithoutVerify
// (ckpt load --no-verify) uploads without loading it, still checking the
// host digests and zip CRC32s. It matches ErrVerifyUnavailable and the
// driver's error (cuda.ErrBadKernel, a *cuda.CUDAError).
type VerifyUnavailableError struct {
	Device remap.Device // the GPU that refused the kernel
	Err    error        // the driver's error
}

// Error says what failed, why, and how to upload anyway.
func (e *VerifyUnavailableError) Error() string {
	return fmt.Sprintf("devicecopy: on-device verification cannot run on %s on this machine: the driver would not load the checksum kernel: %v; "+
		"to upload without on-device verification use ckpt load --no-verify (WithoutVerify): "+
		"the bytes read are still checked against the file's CRC32s and saved digests", e.Device, e.Err)
}

// Unwrap returns ErrVerifyUnavailable and the driver's error.
func (e *VerifyUnavailableError) Unwrap() []error { return []error{ErrVerifyUnavailable, e.Err} }

// launch queues the checksum kernel over ds on the arena's verify stream,
// writing its chunk digests into the arena's digest area.
func (a *Arena) launch(ds *DeviceStorage) error {
	if ds.Storage.NBytes == 0 {
		return nil
	}
	data, size := uint64(ds.Ptr), uint64(ds.Storage.NBytes)
	out := uint64(a.Ptr) + a.digestOff + uint64(ds.firstChunk)*8
	return a.ctx.Launch(a.kernel, [3]uint32{kernels.XXH64CGrid(size), 1, 1}, [3]uint32{kernels.XXH64CBlock, 1, 1}, 0, a.verify,
		unsafe.Pointer(&data), unsafe.Pointer(&size), unsafe.Pointer(&out))
}

// verifyItem is a storage whose copies are queued, and the event recorded
// after the last of them.
type verifyItem struct {
	ds     *DeviceStorage
	copied cuda.Event
}

// verifyLoop launches the kernel over each storage of q once its copies
// are done, keeping the first error.
func (a *Arena) verifyLoop(q <-chan verifyItem) {
	for it := range q {
		if a.err != nil {
			continue
		}
		if err := a.ctx.SynchronizeEvent(it.copied); err != nil {
			a.err = err
			continue
		}
		a.err = a.launch(it.ds)
	}
}
