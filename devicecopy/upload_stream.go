package devicecopy

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/statedict"
)

// uploader is one Upload in progress.
type uploader struct {
	cfg     *uploadConfig
	st      *DeviceState
	staging [][]byte
	owner   *cuda.Context // the context the staging buffers were allocated in

	bufJob   []chan struct{} // closed when the buffer's host hashing is done
	bufArena []*Arena        // where the buffer's last copy went
	jobs     sync.WaitGroup
	done     int64
}

// run allocates, streams every storage and verifies. On error the caller
// frees st's arenas; run frees the staging buffers itself.
func (u *uploader) run(ctx context.Context, d *cuda.Driver, start time.Time) (err error) {
	// Registered before allocating: the staging buffers allocated before a
	// failing one are freed too.
	defer func() {
		// Hashing jobs read the staging buffers: wait for them first.
		u.jobs.Wait()
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
	u.jobs.Wait()
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
	u.bufJob = make([]chan struct{}, len(u.staging))
	u.bufArena = make([]*Arena, len(u.staging))
	return nil
}

// stream reads every storage through the staging buffers and queues the
// copies; a storage whose copies are queued goes to its arena's verify
// queue.
func (u *uploader) stream(ctx context.Context, verifyQ map[*Arena]chan verifyItem) error {
	next := 0
	for _, ds := range u.st.Storages {
		if err := u.storage(ctx, ds, &next); err != nil {
			return err
		}
		if q := verifyQ[ds.arena]; q != nil && ds.Storage.NBytes > 0 {
			a := ds.arena
			e, err := a.ctx.NewEvent(cuda.EventDisableTiming)
			if err != nil {
				return err
			}
			a.events = append(a.events, e)
			if err := a.ctx.RecordEvent(e, a.copyStream); err != nil {
				return err
			}
			q <- verifyItem{ds, e}
		}
	}
	return nil
}

// storage streams one storage; next is the staging buffer to use next.
func (u *uploader) storage(ctx context.Context, ds *DeviceStorage, next *int) error {
	s := ds.Storage
	fail := func(err error) error {
		return fmt.Errorf("devicecopy: reading storage %s (record %s of %s, used by %s): %w",
			s.Key, s.Record, s.File, strings.Join(ds.Tensors, ", "), err)
	}
	ds.sums = make([]uint64, digest.ChunkCount(s.NBytes))
	if ds.Swapped {
		ds.fileSums = make([]uint64, len(ds.sums))
	}
	ds.crcTail = make(chan struct{})
	close(ds.crcTail)
	if s.NBytes == 0 {
		return nil
	}
	rc, err := s.Open()
	if err != nil {
		return fail(err)
	}
	defer rc.Close()
	a := ds.arena
	for off := int64(0); off < s.NBytes; {
		if err := ctx.Err(); err != nil {
			return err
		}
		k := *next
		*next = (k + 1) % len(u.staging)
		if err := u.waitBuffer(k); err != nil {
			return err
		}
		piece := u.staging[k][:min(int64(u.cfg.bufSize), s.NBytes-off)]
		t0 := time.Now()
		_, err := io.ReadFull(rc, piece)
		u.st.ReadTime += time.Since(t0)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fail(err)
		}
		first := off / digest.ChunkSize
		sums := ds.sums[first : first+digest.ChunkCount(int64(len(piece)))]
		prevCRC, myCRC := ds.crcTail, make(chan struct{})
		ds.crcTail = myCRC
		if ds.Swapped {
			// CRC and file digest are over the bytes as stored.
			<-prevCRC
			if s.HasCRC {
				ds.crc = crc32.Update(ds.crc, crc32.IEEETable, piece)
			}
			close(myCRC)
			hashChunks(piece, ds.fileSums[first:first+int64(len(sums))], uint64(first), u.cfg.workers)
			statedict.SwapBytes(piece, s.DType.SwapUnit())
		}
		if err := a.ctx.MemcpyHtoDAsync(ds.Ptr+cuda.DevicePtr(off), piece, a.copyStream); err != nil {
			return err
		}
		if err := a.ctx.RecordEvent(a.bufEvents[k], a.copyStream); err != nil {
			return err
		}
		u.bufArena[k] = a
		done := make(chan struct{})
		u.bufJob[k] = done
		u.jobs.Go(func() {
			defer close(done)
			if !ds.Swapped {
				<-prevCRC
				if s.HasCRC {
					ds.crc = crc32.Update(ds.crc, crc32.IEEETable, piece)
				}
				close(myCRC)
			}
			hashChunks(piece, sums, uint64(first), u.cfg.workers)
		})
		off += int64(len(piece))
		u.done += int64(len(piece))
		if u.cfg.progress != nil {
			u.cfg.progress(u.done, u.st.Bytes)
		}
	}
	return nil
}

// waitBuffer waits until staging buffer k is free: hashed, and copied.
func (u *uploader) waitBuffer(k int) error {
	if u.bufJob[k] != nil {
		<-u.bufJob[k]
	}
	if a := u.bufArena[k]; a != nil {
		return a.ctx.SynchronizeEvent(a.bufEvents[k])
	}
	return nil
}

// hashChunks writes to out the digests of the chunks of piece, whose first
// chunk has index first, on up to workers goroutines.
func hashChunks(piece []byte, out []uint64, first uint64, workers int) {
	per := (len(out) + workers - 1) / max(workers, 1)
	var wg sync.WaitGroup
	for lo := 0; lo < len(out); lo += per {
		hi := min(lo+per, len(out))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				c := piece[i*digest.ChunkSize : min((i+1)*digest.ChunkSize, len(piece))]
				out[i] = digest.ChunkSum(c, first+uint64(i))
			}
		})
	}
	wg.Wait()
}

// finishHost checks the CRC32s and computes the host digests.
func (u *uploader) finishHost() error {
	for _, ds := range u.st.Storages {
		s := ds.Storage
		if s.HasCRC {
			if ds.crc != s.CRC32 {
				return &CRCError{File: s.File, Record: s.Record, Storage: s.Key, Tensors: ds.Tensors, Want: s.CRC32, Got: ds.crc}
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
