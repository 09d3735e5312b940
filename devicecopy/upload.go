package devicecopy

import (
	"context"
	"runtime"
	"time"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// UploadOption configures Upload.
type UploadOption func(*uploadConfig)

type uploadConfig struct {
	driver   *cuda.Driver
	buffers  int
	bufSize  int
	verify   bool
	progress func(done, total int64)
	saved    map[string]digest.Value
	workers  int
}

// WithDriver uploads through d instead of the driver cuda.Open loads.
func WithDriver(d *cuda.Driver) UploadOption { return func(c *uploadConfig) { c.driver = d } }

// WithStaging sets the number of page-locked staging buffers (clamped to
// 2..8; default 8) and the size of each in bytes (rounded up to a multiple
// of 64 KiB and clamped to 64 KiB..1 GiB; default 16 MiB). Host memory
// pinned by an upload is n*size.
func WithStaging(n, size int) UploadOption {
	return func(c *uploadConfig) { c.buffers, c.bufSize = n, size }
}

// WithoutVerify skips the on-device checksum kernel. Host digests and zip
// CRC32s are still computed and checked.
func WithoutVerify() UploadOption { return func(c *uploadConfig) { c.verify = false } }

// WithUploadProgress has fn called with the bytes read and queued for copy
// so far, and the total, after every staging buffer. Calls come from
// Upload's goroutine.
func WithUploadProgress(fn func(done, total int64)) UploadOption {
	return func(c *uploadConfig) { c.progress = fn }
}

// WithSavedDigests gives save-time digests to check, by tensor name: the
// xxh64c of the bytes, in file order, of the storage the tensor views (for
// a safetensors file, the tensor's own bytes), such as `ckpt convert`
// records in safetensors metadata. A tensor without an entry is not
// checked this way; a mismatch is reported as a Mismatch of kind
// MismatchSaved.
func WithSavedDigests(m map[string]digest.Value) UploadOption {
	return func(c *uploadConfig) { c.saved = m }
}

// WithHashConcurrency sets how many goroutines read and hash staging
// buffers at once (default GOMAXPROCS; at most the staging buffers less
// two, which are left for copies in flight).
func WithHashConcurrency(n int) UploadOption { return func(c *uploadConfig) { c.workers = n } }

// Upload copies to the GPUs every storage that plan (from
// remap.NewPlan(ck.Tensors, ...)) sends to a cuda device, and the storage
// values it sends there (plan.Storages: DeviceState.Values), and verifies
// the copies on the devices.
//
// Each target GPU gets one allocation (an Arena) holding its storages at
// 256-byte aligned offsets; a storage that several tensors view is uploaded
// once per device. Storages are read in file order into page-locked staging
// buffers (WithStaging) by several readers at once and queued with
// cuMemcpyHtoDAsync in file order, so that reading the file, hashing on the
// host and copying over PCIe overlap. Big-endian
// storages are swapped to little-endian on the host before the copy. While
// reading, zip CRC32s are checked (*CRCError) and the host digests are
// computed (see DeviceStorage).
//
// Unless WithoutVerify, the checksum kernel (package kernels) runs on a
// second stream over each storage as soon as its copy is done, while later
// storages are still copying; the digests come back and are compared with
// the host's. Mismatches, and save-time digests (WithSavedDigests) that
// disagree, are returned as a *VerifyError matching ErrVerify.
//
// On any error, and when ctx is cancelled, everything allocated on every
// device and on the host is freed before Upload returns.
func Upload(ctx context.Context, ck *statedict.Checkpoint, plan *remap.Plan, opts ...UploadOption) (*DeviceState, error) {
	start := time.Now()
	cfg := uploadConfig{buffers: 8, bufSize: 16 << 20, verify: true, workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.buffers = min(max(cfg.buffers, 2), 8)
	cfg.bufSize = min(max((cfg.bufSize+digest.ChunkSize-1)/digest.ChunkSize*digest.ChunkSize, digest.ChunkSize), 1<<30)
	cfg.workers = max(cfg.workers, 1)
	st, err := layout(ck, plan)
	if err != nil {
		return nil, err
	}
	st.VerifyRequested = cfg.verify
	if len(st.Arenas) == 0 {
		st.Verified = cfg.verify
		return st, nil
	}
	d := cfg.driver
	if d == nil {
		if d, err = cuda.Open(); err != nil {
			return nil, err
		}
	}
	u := &uploader{cfg: &cfg, st: st}
	err = u.run(ctx, d, start)
	if err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}
