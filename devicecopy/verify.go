package devicecopy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/remap"
)

// ErrVerify reports bytes that differ from what they should be: on a device
// after upload, or in the file compared with digests saved with it. See
// *VerifyError.
var ErrVerify = errors.New("devicecopy: verification failed")

// Kinds of Mismatch.
const (
	// MismatchDevice: device memory differs from the bytes read and
	// uploaded (damage in host memory, over PCIe or on the device).
	MismatchDevice = "device"
	// MismatchSaved: the bytes read differ from a digest saved with the
	// checkpoint (WithSavedDigests): the file changed after it was saved.
	MismatchSaved = "saved"
)

// maxChunksReported bounds Mismatch.Chunks.
const maxChunksReported = 16

// Mismatch is one storage whose bytes failed a check.
type Mismatch struct {
	Kind    string       // MismatchDevice or MismatchSaved
	Storage string       // the storage key
	Tensors []string     // the tensors that view it (for MismatchSaved: the one whose saved digest disagrees)
	Device  remap.Device // where it was uploaded
	// Chunks lists the first differing 64 KiB chunks, by index (chunk i is
	// bytes [i*65536, (i+1)*65536) of the storage), at most 16; empty for
	// MismatchSaved, where only whole digests are known.
	Chunks    []int64
	BadChunks int64        // how many chunks differ in all
	Want      digest.Value // the host's digest (MismatchDevice) or the saved one (MismatchSaved)
	Got       digest.Value // the device's digest (MismatchDevice) or the file's (MismatchSaved)
}

// String describes the mismatch in one line.
func (m Mismatch) String() string {
	who := fmt.Sprintf("tensor %s (storage %s) on %s", strings.Join(m.Tensors, ", "), m.Storage, m.Device)
	if len(m.Tensors) != 1 {
		who = fmt.Sprintf("tensors %s (storage %s) on %s", strings.Join(m.Tensors, ", "), m.Storage, m.Device)
	}
	if m.Kind == MismatchSaved {
		return fmt.Sprintf("%s: the file's bytes have %v, the digest saved with the file is %v", who, m.Got, m.Want)
	}
	chunks := make([]string, len(m.Chunks))
	for i, c := range m.Chunks {
		chunks[i] = fmt.Sprintf("%d (bytes %d-%d)", c, c*digest.ChunkSize, (c+1)*digest.ChunkSize-1)
	}
	more := ""
	if m.BadChunks > int64(len(m.Chunks)) {
		more = fmt.Sprintf(" and %d more", m.BadChunks-int64(len(m.Chunks)))
	}
	return fmt.Sprintf("%s: device memory differs from the bytes read in chunk %s%s: device %v, host %v",
		who, strings.Join(chunks, ", "), more, m.Got, m.Want)
}

// VerifyError lists the storages that failed verification. It matches
// ErrVerify.
type VerifyError struct {
	Mismatches []Mismatch
}

// Error lists every mismatch.
func (e *VerifyError) Error() string {
	parts := make([]string, len(e.Mismatches))
	for i, m := range e.Mismatches {
		parts[i] = m.String()
	}
	return "devicecopy: verification failed: " + strings.Join(parts, "; ")
}

// Unwrap returns ErrVerify.
func (e *VerifyError) Unwrap() error { return ErrVerify }

// Verify runs the checksum kernel again over every uploaded storage and
// compares the result with the host digests computed during Upload. It
// returns a *VerifyError when device memory changed or was damaged since,
// and sets Verified and VerifyTime. Kernels for the devices are loaded on
// first use when Upload ran WithoutVerify. Verify first waits for all work
// already queued in the devices' contexts, on any stream.
func (s *DeviceState) Verify(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	start := time.Now()
	for _, a := range s.Arenas {
		// Work queued before Verify, on any stream of the context (such as
		// a cuMemsetD8 on the legacy stream, which does not order with the
		// non-blocking verify stream), must land before the kernel reads.
		if err := a.ctx.Synchronize(); err != nil {
			return err
		}
		if a.module == 0 {
			var err error
			if a.verify, err = a.ctx.NewStream(cuda.StreamNonBlocking); err != nil {
				return err
			}
			if err := a.loadKernel(); err != nil {
				return err
			}
		}
	}
	for _, ds := range s.Storages {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := ds.arena.launch(ds); err != nil {
			return err
		}
	}
	mism, err := s.collect(ctx)
	if err != nil {
		return err
	}
	s.VerifyTime, s.Verified = time.Since(start), len(mism) == 0
	if len(mism) > 0 {
		return &VerifyError{Mismatches: mism}
	}
	return nil
}

// collect waits for the kernels, copies the chunk digests back and
// compares them with the host's, chunk by chunk.
func (s *DeviceState) collect(ctx context.Context) ([]Mismatch, error) {
	var out []Mismatch
	for _, a := range s.Arenas {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := a.ctx.SynchronizeStream(a.verify); err != nil {
			return nil, err
		}
		raw := make([]byte, a.chunks*8)
		if err := a.ctx.MemcpyDtoH(raw, a.Ptr+cuda.DevicePtr(a.digestOff)); err != nil {
			return nil, err
		}
		for _, ds := range s.Storages {
			if ds.arena != a {
				continue
			}
			dev := make([]uint64, len(ds.sums))
			for i := range dev {
				dev[i] = binary.LittleEndian.Uint64(raw[(ds.firstChunk+int64(i))*8:])
			}
			var err error
			if ds.DeviceDigest, err = digest.Combine(ds.Storage.NBytes, dev); err != nil {
				return nil, err
			}
			m := Mismatch{Kind: MismatchDevice, Storage: ds.Storage.Key, Tensors: users(ds.Tensors, ds.Values), Device: ds.Device,
				Want: ds.UploadDigest, Got: ds.DeviceDigest}
			for i := range dev {
				if dev[i] != ds.sums[i] {
					m.BadChunks++
					if len(m.Chunks) < maxChunksReported {
						m.Chunks = append(m.Chunks, int64(i))
					}
				}
			}
			if m.BadChunks > 0 || m.Got != m.Want {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// savedMismatches compares the file digest with the saved digests of the
// tensors that view the storage.
func (ds *DeviceStorage) savedMismatches(saved map[string]digest.Value) []Mismatch {
	var out []Mismatch
	for _, name := range ds.Tensors {
		want, ok := saved[name]
		if ok && want != ds.FileDigest {
			out = append(out, Mismatch{Kind: MismatchSaved, Storage: ds.Storage.Key, Tensors: []string{name},
				Device: ds.Device, Want: want, Got: ds.FileDigest})
		}
	}
	return out
}
