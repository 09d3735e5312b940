package devicecopy

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/kernels"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// ErrClosed reports use of a DeviceState after Close.
var ErrClosed = errors.New("devicecopy: device state was closed")

// arenaAlign is the alignment of every storage inside a device arena, and
// of the digest area at its end (cuMemAlloc itself aligns to 256 bytes).
const arenaAlign = 256

// maxArena bounds one device allocation (64 PiB), far above any GPU, so
// that sizes from a hostile file cannot overflow the arena arithmetic.
const maxArena = 1 << 56

// UploadOption configures Upload.
type UploadOption func(*uploadConfig)

type uploadConfig struct {
	driver   *Driver
	buffers  int
	bufSize  int
	verify   bool
	progress func(done, total int64)
	saved    map[string]digest.Value
	workers  int
}

// WithDriver uploads through d instead of the driver Open loads.
func WithDriver(d *Driver) UploadOption { return func(c *uploadConfig) { c.driver = d } }

// WithStaging sets the number of page-locked staging buffers (clamped to
// 2..8; default 3) and the size of each in bytes (rounded up to a multiple
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

// WithHashConcurrency sets how many goroutines hash each staging buffer on
// the host (default GOMAXPROCS).
func WithHashConcurrency(n int) UploadOption { return func(c *uploadConfig) { c.workers = n } }

// DeviceState is a checkpoint uploaded to one or more GPUs. Close frees
// every device allocation and releases the contexts; the pointers of its
// tensors are invalid afterwards.
type DeviceState struct {
	Tensors  []DeviceTensor   // every uploaded tensor, in the checkpoint's order
	Storages []*DeviceStorage // every uploaded storage, once per target device
	Arenas   []*Arena         // one per target GPU, in the plan's device order
	// Skipped names the tensors not uploaded: their target is not a GPU
	// (load them with LoadHost), or they have no data (meta tensors).
	Skipped []string
	Bytes   int64 // storage bytes uploaded, each storage once per device

	// ReadTime is the time spent reading the file (and waiting for it).
	ReadTime time.Duration
	// UploadTime is the wall time from the start of Upload until the last
	// copy finished on every device: reading, hashing and copying overlap
	// inside it.
	UploadTime time.Duration
	// VerifyTime is the wall time verification added after the last copy
	// finished: the kernels still running, the digests copied back and
	// compared. Zero when not verified.
	VerifyTime time.Duration
	// Verified is true when every storage's device digest matched.
	Verified bool

	closed bool
}

// Arena is the single device allocation of one target GPU: the storages at
// 256-byte aligned offsets, then the checksum kernel's chunk digests.
type Arena struct {
	Device   remap.Device
	Ptr      DevicePtr // base of the allocation
	Size     uint64    // bytes allocated
	Bytes    int64     // storage bytes in it
	Storages int       // storages in it

	ctx        *Context
	copyStream Stream
	verify     Stream
	module     Module
	kernel     Function
	bufEvents  []Event // one per staging buffer: its last copy here
	events     []Event // one per storage: its last copy queued
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
	Ptr          DevicePtr // its first byte on the device
	FileDigest   digest.Value
	UploadDigest digest.Value
	DeviceDigest digest.Value // zero until verified
	Swapped      bool         // bytes were swapped to little-endian before upload
	CRCChecked   bool         // the zip record's CRC32 matched the bytes read
	Tensors      []string     // the uploaded tensors that view it

	arena      *Arena
	off        uint64   // offset in the arena
	firstChunk int64    // index of its first chunk digest in the arena's digest area
	sums       []uint64 // host chunk digests of the uploaded bytes
	fileSums   []uint64 // host chunk digests in file order, when Swapped
	crc        uint32
	crcTail    chan struct{} // closed when the last queued piece's CRC is done
}

// DeviceTensor is one uploaded tensor: a view of its storage on a GPU, as
// torch holds it (storage + offset, shape, strides).
type DeviceTensor struct {
	Name    string
	Device  remap.Device
	Ptr     DevicePtr // storage base + Offset*element size
	DType   statedict.DType
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
	for _, st := range []Stream{a.copyStream, a.verify} {
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

// Upload copies to the GPUs every storage that plan (from
// remap.NewPlan(ck.Tensors, ...)) sends to a cuda device, and verifies the
// copies on the devices.
//
// Each target GPU gets one allocation (an Arena) holding its storages at
// 256-byte aligned offsets; a storage that several tensors view is uploaded
// once per device. Storages are read in file order into page-locked staging
// buffers (WithStaging) and queued with cuMemcpyHtoDAsync, so that reading
// the file, hashing on the host and copying over PCIe overlap. Big-endian
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
	cfg := uploadConfig{buffers: 3, bufSize: 16 << 20, verify: true, workers: runtime.GOMAXPROCS(0)}
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
	if len(st.Arenas) == 0 {
		st.Verified = cfg.verify
		return st, nil
	}
	d := cfg.driver
	if d == nil {
		if d, err = Open(); err != nil {
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

// layout plans the arenas: which storages go where, at which offsets.
func layout(ck *statedict.Checkpoint, plan *remap.Plan) (*DeviceState, error) {
	if len(plan.Entries) != len(ck.Tensors) {
		return nil, fmt.Errorf("%w: %d plan entries for %d tensors", ErrPlanMismatch, len(plan.Entries), len(ck.Tensors))
	}
	st := &DeviceState{}
	arenas := map[remap.Device]*Arena{}
	for _, u := range plan.Devices() {
		if u.Device.Type == "cuda" {
			a := &Arena{Device: u.Device}
			arenas[u.Device] = a
			st.Arenas = append(st.Arenas, a)
		}
	}
	type key struct {
		s *statedict.Storage
		d remap.Device
	}
	placed := map[key]*DeviceStorage{}
	add := func(s *statedict.Storage, d remap.Device) (*DeviceStorage, error) {
		if s.NBytes < 0 {
			return nil, fmt.Errorf("%w: storage %s has %d bytes", ErrLayout, s.Key, s.NBytes)
		}
		ds := placed[key{s, d}]
		if ds == nil {
			ds = &DeviceStorage{Storage: s, Device: d, arena: arenas[d],
				Swapped: s.BigEndian && s.DType.SwapUnit() > 1}
			placed[key{s, d}] = ds
			st.Storages = append(st.Storages, ds)
		}
		return ds, nil
	}
	for i, t := range ck.Tensors {
		e := plan.Entries[i]
		if e.Name != t.Name {
			return nil, fmt.Errorf("%w: entry %d is %q, tensor %d is %q", ErrPlanMismatch, i, e.Name, i, t.Name)
		}
		if e.Target.Type != "cuda" || t.Storage == nil || t.Meta {
			st.Skipped = append(st.Skipped, t.Name)
			continue
		}
		ds, err := add(t.Storage, e.Target)
		if err != nil {
			return nil, err
		}
		if err := checkView(t); err != nil {
			return nil, err
		}
		ds.Tensors = append(ds.Tensors, t.Name)
		st.Tensors = append(st.Tensors, DeviceTensor{Name: t.Name, Device: e.Target, DType: t.DType,
			Shape: append([]int64(nil), t.Shape...), Strides: append([]int64(nil), t.Strides...),
			Offset: t.Offset, Bytes: t.NBytes(), Storage: ds})
		if q := t.Quant; q != nil {
			for _, qt := range []*statedict.Tensor{q.Scales, q.Zeros} {
				if qt != nil && qt.Storage != nil {
					if _, err := add(qt.Storage, e.Target); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	// File order: the checkpoint's storage order, then the others by key.
	order := map[*statedict.Storage]int{}
	for i, s := range ck.Storages {
		order[s] = i
	}
	sort.SliceStable(st.Storages, func(i, j int) bool {
		oi, iok := order[st.Storages[i].Storage]
		oj, jok := order[st.Storages[j].Storage]
		if iok != jok {
			return iok
		}
		if iok {
			return oi < oj
		}
		return st.Storages[i].Storage.Key < st.Storages[j].Storage.Key
	})
	for _, ds := range st.Storages {
		a, n := ds.arena, uint64(ds.Storage.NBytes)
		if n > maxArena || a.Size > maxArena-n {
			return nil, fmt.Errorf("%w: storage %s of %d bytes makes %s's allocation larger than %d bytes", ErrLayout,
				ds.Storage.Key, n, a.Device, uint64(maxArena))
		}
		ds.off = a.Size
		ds.firstChunk = a.chunks
		a.Size = alignUp(a.Size + n)
		a.chunks += digest.ChunkCount(ds.Storage.NBytes)
		a.Bytes += ds.Storage.NBytes
		a.Storages++
		st.Bytes += ds.Storage.NBytes
	}
	for _, a := range st.Arenas {
		a.digestOff = a.Size
		a.Size = max(alignUp(a.Size+uint64(a.chunks)*8), arenaAlign)
	}
	return st, nil
}

// checkView refuses a tensor whose elements are not inside its storage.
func checkView(t *statedict.Tensor) error {
	for _, s := range t.Strides {
		if s < 0 {
			return fmt.Errorf("%w: tensor %q has a negative stride", ErrLayout, t.Name)
		}
	}
	begin, end := t.Span()
	es := int64(max(t.DType.Size(), 1))
	if t.NBytes() < 0 || len(t.Strides) != len(t.Shape) || t.Offset < 0 || t.Offset > t.Storage.NBytes/es ||
		begin < 0 || end < begin || end > t.Storage.NBytes {
		return fmt.Errorf("%w: tensor %q spans bytes [%d, %d) of a %d-byte storage", ErrLayout, t.Name, begin, end, t.Storage.NBytes)
	}
	return nil
}

func alignUp(n uint64) uint64 { return (n + arenaAlign - 1) / arenaAlign * arenaAlign }

// uploader is one Upload in progress.
type uploader struct {
	cfg     *uploadConfig
	st      *DeviceState
	staging [][]byte
	owner   *Context // the context the staging buffers were allocated in

	bufJob   []chan struct{} // closed when the buffer's host hashing is done
	bufArena []*Arena        // where the buffer's last copy went
	jobs     sync.WaitGroup
	done     int64
}

// run allocates, streams every storage and verifies. On error the caller
// frees st's arenas; run frees the staging buffers itself.
func (u *uploader) run(ctx context.Context, d *Driver, start time.Time) (err error) {
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
func (u *uploader) allocate(d *Driver) error {
	for _, a := range u.st.Arenas {
		c, err := d.PrimaryContext(a.Device.Index)
		if err != nil {
			return err
		}
		a.ctx = c
		if a.Ptr, err = c.MemAlloc(a.Size); err != nil {
			return fmt.Errorf("allocating %s on %s: %w", sizeString(a.Size), a.Device, err)
		}
		if a.copyStream, err = c.NewStream(StreamNonBlocking); err != nil {
			return err
		}
		for range u.cfg.buffers {
			e, err := c.NewEvent(EventDisableTiming)
			if err != nil {
				return err
			}
			a.bufEvents = append(a.bufEvents, e)
		}
		if !u.cfg.verify {
			continue
		}
		if a.verify, err = c.NewStream(StreamNonBlocking); err != nil {
			return err
		}
		if err := a.loadKernel(); err != nil {
			return err
		}
	}
	for _, ds := range u.st.Storages {
		ds.Ptr = ds.arena.Ptr + DevicePtr(ds.off)
	}
	for i := range u.st.Tensors {
		t := &u.st.Tensors[i]
		t.Ptr = t.Storage.Ptr + DevicePtr(t.Offset*int64(t.DType.Size()))
	}
	u.owner = u.st.Arenas[0].ctx
	for range u.cfg.buffers {
		b, err := u.owner.MemHostAlloc(u.cfg.bufSize, HostAllocPortable)
		if err != nil {
			return fmt.Errorf("allocating page-locked staging memory: %w", err)
		}
		u.staging = append(u.staging, b)
	}
	u.bufJob = make([]chan struct{}, len(u.staging))
	u.bufArena = make([]*Arena, len(u.staging))
	return nil
}

// loadKernel loads the checksum kernel's fat binary into the arena's
// context: the driver takes the cubin built for the GPU's architecture
// (sm_75 to sm_90, no JIT) or JIT-compiles the PTX inside it (newer GPUs).
// A driver that refuses it (no cubin fits and the PTX JIT is missing or
// disabled, the PTX too new, a GPU older than sm_75) makes a
// *VerifyUnavailableError.
func (a *Arena) loadKernel() error {
	m, err := a.ctx.LoadModule(kernels.XXH64CFatbin)
	if err != nil {
		if errors.Is(err, ErrBadKernel) {
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
// driver's error (ErrBadKernel, a *CUDAError).
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
			e, err := a.ctx.NewEvent(EventDisableTiming)
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
		if err := a.ctx.MemcpyHtoDAsync(ds.Ptr+DevicePtr(off), piece, a.copyStream); err != nil {
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
	copied Event
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
