package devicecopy

import (
	"errors"
	"time"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// ErrClosed reports use of a DeviceState after Close.
var ErrClosed = errors.New("devicecopy: device state was closed")

// DeviceState is a checkpoint uploaded to one or more GPUs. Close frees
// every device allocation and releases the contexts; the pointers of its
// tensors are invalid afterwards.
type DeviceState struct {
	Tensors []DeviceTensor // every uploaded tensor, in the checkpoint's order
	// Values lists the storage values (plan.Storages) uploaded, in the
	// plan's order; their storages are in Storages, once per device.
	Values   []DeviceValue
	Storages []*DeviceStorage // every uploaded storage, once per target device
	Arenas   []*Arena         // one per target GPU, in the plan's device order
	// Skipped names the tensors not uploaded: their target is not a GPU
	// (load them with LoadHost), or they have no data (meta tensors).
	Skipped []string
	Bytes   int64 // storage bytes uploaded, each storage once per device

	// ReadTime is the time spent reading the file (and waiting for it):
	// with several readers at once, the time they spent in reads summed and
	// divided by their number.
	ReadTime time.Duration
	// UploadTime is the wall time from the start of Upload until the last
	// copy finished on every device: reading, hashing and copying overlap
	// inside it.
	UploadTime time.Duration
	// VerifyTime is the wall time verification added after the last copy
	// finished: the kernels still running, the digests copied back and
	// compared. Zero when not verified.
	VerifyTime time.Duration
	// VerifyRequested is true when on-device verification was asked for (no
	// WithoutVerify).
	VerifyRequested bool
	// Verified is true when every storage's device digest matched.
	Verified bool
	// Mismatches lists the storages that failed verification. A failed
	// Upload returns them in its *VerifyError and no state; this field
	// carries them in a state built to report that failure (ckpt.Model's
	// Report).
	Mismatches []Mismatch

	closed bool
}

// Arena is the single device allocation of one target GPU: the storages at
// 256-byte aligned offsets, then the checksum kernel's chunk digests.
type Arena struct {
	Device   remap.Device
	Ptr      cuda.DevicePtr // base of the allocation
	Size     uint64         // bytes allocated
	Bytes    int64          // storage bytes in it
	Storages int            // storages in it

	ctx        *cuda.Context
	copyStream cuda.Stream
	verify     cuda.Stream
	module     cuda.Module
	kernel     cuda.Function
	bufEvents  []cuda.Event // one per staging buffer: its last copy here
	events     []cuda.Event // one per storage: its last copy queued
	digestOff  uint64
	chunks     int64
	err        error // first error of the verify goroutine
}

// DeviceStorage is one storage on one GPU. Digests (docs/checksum.md):
//   - FileDigest is over the storage's bytes in file order and file byte
//     order, as LoadHost and `ckpt verify` compute it and as save-time
//     digests are recorded; it is checked against WithSavedDigests.
//   - UploadDigest is over the bytes as uploaded: for a big-endian storage
//     of a multi-byte dtype after the swap to little-endian, otherwise equal
//     to FileDigest. The device must hold exactly these bytes.
//   - DeviceDigest is what the kernel computed over device memory; it is
//     compared with UploadDigest, chunk by chunk.
type DeviceStorage struct {
	Storage      *statedict.Storage
	Device       remap.Device
	Ptr          cuda.DevicePtr // its first byte on the device
	FileDigest   digest.Value
	UploadDigest digest.Value
	DeviceDigest digest.Value // zero until verified
	Swapped      bool         // bytes were swapped to little-endian before upload
	CRCChecked   bool         // the zip record's CRC32 matched the bytes read
	Tensors      []string     // the uploaded tensors that view it
	Values       []string     // the storage values holding it (plan.Storages)

	arena      *Arena
	off        uint64   // offset in the arena
	firstChunk int64    // index of its first chunk digest in the arena's digest area
	sums       []uint64 // host chunk digests of the uploaded bytes
	fileSums   []uint64 // host chunk digests in file order, when Swapped
	crcs       []uint32 // each chunk's CRC32 of the bytes as stored, when the record has one
	crc        uint32
}

// DeviceTensor is one uploaded tensor: a view of its storage on a GPU, as
// torch holds it (storage + offset, shape, strides).
type DeviceTensor struct {
	Name    string
	Device  remap.Device
	Ptr     cuda.DevicePtr // storage base + Offset*element size
	DType   dtype.DType
	Shape   []int64
	Strides []int64 // in elements
	Offset  int64   // storage offset in elements
	Bytes   int64   // bytes of its logical elements
	Storage *DeviceStorage
}

// Tensor returns the uploaded tensor with the given name.
func (s *DeviceState) Tensor(name string) (DeviceTensor, bool) {
	for _, t := range s.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return DeviceTensor{}, false
}

// Close frees every device allocation, stream and module of the upload and
// releases the devices' primary contexts. It is safe to call twice.
func (s *DeviceState) Close() error {
	if s == nil || s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	for _, a := range s.Arenas {
		errs = append(errs, a.free())
	}
	return errors.Join(errs...)
}

// free releases everything the arena holds, after waiting for its streams.
func (a *Arena) free() error {
	if a.ctx == nil {
		return nil
	}
	c := a.ctx
	var errs []error
	for _, st := range []cuda.Stream{a.copyStream, a.verify} {
		if st != 0 {
			errs = append(errs, c.SynchronizeStream(st), c.DestroyStream(st))
		}
	}
	for _, e := range append(a.bufEvents, a.events...) {
		errs = append(errs, c.DestroyEvent(e))
	}
	if a.module != 0 {
		errs = append(errs, c.UnloadModule(a.module))
	}
	if a.Ptr != 0 {
		errs = append(errs, c.MemFree(a.Ptr))
	}
	errs = append(errs, c.Release())
	*a = Arena{Device: a.Device, Size: a.Size, Bytes: a.Bytes, Storages: a.Storages}
	return errors.Join(errs...)
}
