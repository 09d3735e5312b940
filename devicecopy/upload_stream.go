package devicecopy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
)

// uploader is one Upload in progress.
type uploader struct {
	cfg     *uploadConfig
	st      *DeviceState
	staging [][]byte
	owner   *cuda.Context // the context the staging buffers were allocated in

	bufArena []*Arena // where the buffer's last copy went (set before the buffer is free again)
	done     int64
}

// run allocates, streams every storage and verifies. On error the caller
// frees st's arenas; run frees the staging buffers itself.
func (u *uploader) run(ctx context.Context, d *cuda.Driver, start time.Time) (err error) {
	// Registered before allocating: the staging buffers allocated before a
	// failing one are freed too.
	defer func() {
		for _, a := range u.st.Arenas {
			if a.ctx != nil && a.copyStream != 0 {
				a.ctx.SynchronizeStream(a.copyStream)
			}
		}
		for _, b := range u.staging {
			if ferr := u.owner.MemFreeHost(b); err == nil {
				err = ferr
			}
		}
		u.staging = nil
	}()
	if err := u.allocate(d); err != nil {
		return err
	}
	verifyQ := map[*Arena]chan verifyItem{}
	var vwg sync.WaitGroup
	if u.cfg.verify {
		for _, a := range u.st.Arenas {
			q := make(chan verifyItem, len(u.st.Storages))
			verifyQ[a] = q
			vwg.Go(func() { a.verifyLoop(q) })
		}
	}
	err = u.stream(ctx, verifyQ)
	for _, q := range verifyQ {
		close(q)
	}
	vwg.Wait()
	if err != nil {
		return err
	}
	for _, a := range u.st.Arenas {
		if err := a.ctx.SynchronizeStream(a.copyStream); err != nil {
			return err
		}
	}
	u.st.UploadTime = time.Since(start)
	if err := u.finishHost(); err != nil {
		return err
	}
	var mism []Mismatch
	for _, ds := range u.st.Storages {
		mism = append(mism, ds.savedMismatches(u.cfg.saved)...)
	}
	if u.cfg.verify {
		for _, a := range u.st.Arenas {
			if a.err != nil {
				return a.err
			}
		}
		vm, err := u.st.collect(ctx)
		if err != nil {
			return err
		}
		mism = append(mism, vm...)
		u.st.VerifyTime = time.Since(start) - u.st.UploadTime
		u.st.Verified = len(mism) == 0
	}
	if len(mism) > 0 {
		return &VerifyError{Mismatches: mism}
	}
	return nil
}

// allocate retains every target's context and allocates its arena,
// streams, events and kernel, then the staging buffers.
func (u *uploader) allocate(d *cuda.Driver) error {
	for _, a := range u.st.Arenas {
		c, err := d.PrimaryContext(a.Device.Index)
		if err != nil {
			return err
		}
		a.ctx = c
		if a.Ptr, err = c.MemAlloc(a.Size); err != nil {
			return fmt.Errorf("allocating %s on %s: %w", sizeString(a.Size), a.Device, err)
		}
		if a.copyStream, err = c.NewStream(cuda.StreamNonBlocking); err != nil {
			return err
		}
		for range u.cfg.buffers {
			e, err := c.NewEvent(cuda.EventDisableTiming)
			if err != nil {
				return err
			}
			a.bufEvents = append(a.bufEvents, e)
		}
		if !u.cfg.verify {
			continue
		}
		if a.verify, err = c.NewStream(cuda.StreamNonBlocking); err != nil {
			return err
		}
		if err := a.loadKernel(); err != nil {
			return err
		}
	}
	for _, ds := range u.st.Storages {
		ds.Ptr = ds.arena.Ptr + cuda.DevicePtr(ds.off)
	}
	for i := range u.st.Tensors {
		t := &u.st.Tensors[i]
		t.Ptr = t.Storage.Ptr + cuda.DevicePtr(t.Offset*int64(t.DType.Size()))
	}
	u.owner = u.st.Arenas[0].ctx
	for range u.cfg.buffers {
		b, err := u.owner.MemHostAlloc(u.cfg.bufSize, cuda.HostAllocPortable)
		if err != nil {
			return fmt.Errorf("allocating page-locked staging memory: %w", err)
		}
		u.staging = append(u.staging, b)
	}
	u.bufArena = make([]*Arena, len(u.staging))
	return nil
}

// finishHost checks the CRC32s and computes the host digests.
func (u *uploader) finishHost() error {
	for _, ds := range u.st.Storages {
		s := ds.Storage
		if s.HasCRC {
			ds.crc = combineCRCs(s.NBytes, ds.crcs)
			ds.crcs = nil
			if ds.crc != s.CRC32 {
				return &CRCError{File: s.File, Record: s.Record, Storage: s.Key, Tensors: users(ds.Tensors, ds.Values), Want: s.CRC32, Got: ds.crc}
			}
			ds.CRCChecked = true
		}
		var err error
		if ds.UploadDigest, err = digest.Combine(s.NBytes, ds.sums); err != nil {
			return err
		}
		ds.FileDigest = ds.UploadDigest
		if ds.Swapped {
			if ds.FileDigest, err = digest.Combine(s.NBytes, ds.fileSums); err != nil {
				return err
			}
			ds.fileSums = nil
		}
	}
	return nil
}
