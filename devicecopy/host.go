package devicecopy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Sentinel errors of LoadHost.
var (
	// ErrCRC reports storage bytes that disagree with the CRC32 the zip
	// archive recorded for their record. See *CRCError.
	ErrCRC = errors.New("devicecopy: CRC32 mismatch")
	// ErrPlanMismatch reports a plan that was not made from the
	// checkpoint's tensors (remap.NewPlan(ck.Tensors, ...)).
	ErrPlanMismatch = errors.New("devicecopy: the plan was not made for this checkpoint")
	// ErrHostLimit reports a load larger than the host memory limit. See
	// *LimitError.
	ErrHostLimit = errors.New("devicecopy: load exceeds the host memory limit")
	// ErrReleased reports access to tensor data after HostResult.Release.
	ErrReleased = errors.New("devicecopy: host data was released")
	// ErrLayout reports a tensor whose offset, shape and strides do not fit
	// in its storage.
	ErrLayout = errors.New("devicecopy: tensor does not fit its storage")
)

// CRCError reports a storage whose bytes fail the CRC32 check of its zip
// record: the file was damaged after torch.save wrote it. It matches ErrCRC.
type CRCError struct {
	File    string   // the checkpoint file (or shard)
	Record  string   // the zip record, e.g. "archive/data/0"
	Storage string   // the storage key
	Tensors []string // the tensors that view the storage
	Want    uint32   // the CRC32 the archive recorded
	Got     uint32   // the CRC32 of the bytes read
}

// Error names the storage, its record, the tensors using it and both CRCs.
func (e *CRCError) Error() string {
	return fmt.Sprintf("devicecopy: storage %s (record %s of %s) is damaged: its bytes have CRC32 %08x, the archive recorded %08x; tensors using it: %s",
		e.Storage, e.Record, e.File, e.Got, e.Want, strings.Join(e.Tensors, ", "))
}

// Unwrap returns ErrCRC.
func (e *CRCError) Unwrap() error { return ErrCRC }

// LimitError reports a load refused because it needs more host memory than
// allowed. It matches ErrHostLimit.
type LimitError struct {
	Needed int64 // bytes the load would hold
	Limit  int64 // the limit (WithMaxHostBytes, or the memory available)
}

// Error gives both sizes.
func (e *LimitError) Error() string {
	return fmt.Sprintf("devicecopy: loading needs %s of host memory, the limit is %s", sizeString(uint64(e.Needed)), sizeString(uint64(e.Limit)))
}

// Unwrap returns ErrHostLimit.
func (e *LimitError) Unwrap() error { return ErrHostLimit }

// HostOption configures LoadHost.
type HostOption func(*hostConfig)

type hostConfig struct {
	workers  int
	limit    int64 // 0: the memory available, when known
	progress func(done, total int64)
	mapFiles bool // WithFileMapping
}

// WithConcurrency sets how many storages are read at once (default
// GOMAXPROCS); n < 1 means the default.
func WithConcurrency(n int) HostOption { return func(c *hostConfig) { c.workers = n } }

// WithMaxHostBytes refuses (*LimitError) a load whose storages total more
// than n bytes, before anything is allocated. By default the limit is
// MemAvailable of /proc/meminfo, and there is none where that is unknown.
func WithMaxHostBytes(n int64) HostOption { return func(c *hostConfig) { c.limit = n } }

// WithProgress has fn called with the bytes read so far and the total after
// every piece read (a few MiB). Calls are serialised but come from the
// loading goroutines, so fn must be quick.
func WithProgress(fn func(done, total int64)) HostOption {
	return func(c *hostConfig) { c.progress = fn }
}

// pieceSize is how much of a storage is read, checked and hashed at a time.
const pieceSize = 1 << 20

// HostResult is a checkpoint loaded into host memory. Its buffers are
// ordinary Go memory; Release drops them.
type HostResult struct {
	Storages []*HostStorage // every storage loaded, in the checkpoint's order
	Tensors  []HostTensor   // every tensor loaded, in the checkpoint's order
	// Values lists the storage values (plan.Storages) loaded, in the
	// plan's order; their storages are in Storages once, with the tensors'.
	Values []HostValue
	// Skipped names the tensors not loaded: their target is not the cpu,
	// or they have no data (meta tensors).
	Skipped []string
	Bytes   int64         // bytes read: each storage once
	Elapsed time.Duration // wall time of the load
	// Mismatches lists the storages whose digest disagrees with a digest
	// saved with the file (kind MismatchSaved). LoadHost does not know
	// saved digests and leaves it empty; ckpt.Load fills it.
	Mismatches []Mismatch

	maps *fileMaps // WithFileMapping: the files mapped, unmapped by Release
}

// HostStorage is one storage's bytes in host memory.
type HostStorage struct {
	Storage *statedict.Storage
	// Data holds the storage's bytes exactly as in the file: file order and
	// file byte order (see Storage.BigEndian). HostTensor.Bytes gives a
	// tensor's logical little-endian elements.
	Data []byte
	// Digest is the xxh64c (docs/checksum.md) of Data: of the storage's
	// bytes in file order, before any byte swap, including bytes that no
	// tensor views. A device copy of Data has the same digest.
	Digest     digest.Value
	CRCChecked bool     // the archive recorded a CRC32 and Data matches it
	Tensors    []string // the tensors that view it
	Values     []string // the storage values holding it (plan.Storages)
	// Mapped is true when Data is a mapping of the file (WithFileMapping),
	// not a copy: Release unmaps it.
	Mapped bool
	// MemFile is true when Data is a copy received into the load's
	// memory file, a mapping that Release unmaps (WithFileMapping, for
	// a storage read from an object store: memfile.go).
	MemFile bool
}

// HostTensor is a loaded tensor and the storage holding its bytes.
type HostTensor struct {
	Tensor  *statedict.Tensor
	Storage *HostStorage
}

// GBPerSecond is Bytes per second of Elapsed, in 10^9 bytes per second.
func (r *HostResult) GBPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / r.Elapsed.Seconds() / 1e9
}

// Tensor returns the loaded tensor with the given name.
func (r *HostResult) Tensor(name string) (HostTensor, bool) {
	for _, t := range r.Tensors {
		if t.Tensor.Name == name {
			return t, true
		}
	}
	return HostTensor{}, false
}

// Release drops every buffer so that the garbage collector can free it.
// Copied Data slices obtained earlier stay valid while their holders keep
// them; mapped ones (WithFileMapping: Mapped or MemFile) are unmapped and
// must not be used.
func (r *HostResult) Release() {
	for _, s := range r.Storages {
		s.Data = nil
	}
	if r.maps != nil {
		r.maps.release()
	}
}

// Bytes returns the tensor's logical elements in C order, little-endian:
// what torch holds after tensor.contiguous(). For a contiguous tensor of a
// little-endian storage it is a slice of the storage's Data (shared memory:
// do not modify it); otherwise a new slice. A view larger than its storage
// (overlapping elements, stride 0) is refused with ErrLayout rather than
// materialised, so the memory used never exceeds the storage's size.
func (t HostTensor) Bytes() ([]byte, error) {
	tt, data := t.Tensor, t.Storage.Data
	if data == nil && t.Storage.Storage.NBytes > 0 {
		return nil, fmt.Errorf("%w (tensor %q)", ErrReleased, tt.Name)
	}
	n := tt.NBytes()
	if n == 0 {
		return []byte{}, nil
	}
	for _, s := range tt.Strides {
		if s < 0 {
			return nil, fmt.Errorf("%w: tensor %q has a negative stride", ErrLayout, tt.Name)
		}
	}
	begin, end := tt.Span()
	if n < 0 || len(tt.Strides) != len(tt.Shape) || begin < 0 || end < begin || end > int64(len(data)) {
		return nil, fmt.Errorf("%w: tensor %q spans bytes [%d, %d) of a %d-byte storage", ErrLayout, tt.Name, begin, end, len(data))
	}
	swap := 0
	if t.Storage.Storage.BigEndian && tt.DType.SwapUnit() > 1 {
		swap = tt.DType.SwapUnit()
	}
	if tt.IsContiguous() {
		if swap == 0 {
			return data[begin : begin+n : begin+n], nil
		}
		out := append([]byte(nil), data[begin:begin+n]...)
		statedict.SwapBytes(out, swap)
		return out, nil
	}
	if n > int64(len(data)) {
		// Only an overlapping view (a stride 0, as torch's expand makes)
		// is larger than its storage; its size is not bounded by the file.
		return nil, fmt.Errorf("%w: tensor %q is an overlapping view of %d bytes over a %d-byte storage, not materialised",
			ErrLayout, tt.Name, n, len(data))
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(tt.OpenFrom(bytes.NewReader(data)), out); err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %v", ErrLayout, tt.Name, err)
	}
	return out, nil
}

// LoadHost reads into host memory the storages of every tensor that plan
// sends to the cpu (plan must come from remap.NewPlan(ck.Tensors, ...)),
// and the storage values it sends there (plan.Storages: Values).
// Each storage is read once however many tensors view it, including the
// scale and zero-point storages of per-channel quantized tensors. While
// reading, it checks each storage's bytes against the CRC32 of its zip
// record where the archive recorded one (*CRCError on a mismatch) and
// computes their xxh64c digest over the bytes in file order.
//
// Storages are read concurrently (WithConcurrency); the memory held is the
// loaded data and nothing more. The total is checked against the limit of
// WithMaxHostBytes before any buffer is allocated. On error, or when ctx
// is cancelled, nothing is returned and the buffers are left to the
// garbage collector.
func LoadHost(ctx context.Context, ck *statedict.Checkpoint, plan *remap.Plan, opts ...HostOption) (*HostResult, error) {
	start := time.Now()
	cfg := hostConfig{workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.workers < 1 {
		cfg.workers = runtime.GOMAXPROCS(0)
	}
	if len(plan.Entries) != len(ck.Tensors) {
		return nil, fmt.Errorf("%w: %d plan entries for %d tensors", ErrPlanMismatch, len(plan.Entries), len(ck.Tensors))
	}
	if err := checkValues(ck, plan); err != nil {
		return nil, err
	}
	res := &HostResult{}
	loaded := map[*statedict.Storage]*HostStorage{}
	add := func(s *statedict.Storage, users ...string) *HostStorage {
		hs := loaded[s]
		if hs == nil {
			hs = &HostStorage{Storage: s}
			loaded[s] = hs
			res.Bytes += s.NBytes
		}
		hs.Tensors = append(hs.Tensors, users...)
		return hs
	}
	for i, t := range ck.Tensors {
		e := plan.Entries[i]
		if e.Name != t.Name {
			return nil, fmt.Errorf("%w: entry %d is %q, tensor %d is %q", ErrPlanMismatch, i, e.Name, i, t.Name)
		}
		if e.Target.Type != "cpu" || t.Storage == nil || t.Meta {
			res.Skipped = append(res.Skipped, t.Name)
			continue
		}
		if t.Storage.NBytes < 0 {
			return nil, fmt.Errorf("%w: tensor %q has a storage of %d bytes", ErrLayout, t.Name, t.Storage.NBytes)
		}
		res.Tensors = append(res.Tensors, HostTensor{Tensor: t, Storage: add(t.Storage, t.Name)})
		if q := t.Quant; q != nil {
			for _, qt := range []*statedict.Tensor{q.Scales, q.Zeros} {
				if qt != nil && qt.Storage != nil && qt.Storage.NBytes >= 0 {
					add(qt.Storage)
				}
			}
		}
	}
	for _, v := range plan.Storages {
		if v.Target.Type == "cpu" {
			hs := add(v.Storage)
			hs.Values = append(hs.Values, v.Name)
			res.Values = append(res.Values, HostValue{Name: v.Name, Storage: hs})
		}
	}
	limit := cfg.limit
	if limit == 0 {
		if avail, ok := hostAvailable(); ok {
			limit = int64(min(avail, 1<<62))
		}
	}
	if limit > 0 && res.Bytes > limit {
		return nil, &LimitError{Needed: res.Bytes, Limit: limit}
	}
	// Order: the checkpoint's storage order, then any storage it does not
	// list (a quantizer's), in order of first use.
	order := map[*statedict.Storage]int{}
	for i, s := range ck.Storages {
		order[s] = i
	}
	for s := range loaded {
		res.Storages = append(res.Storages, loaded[s])
	}
	sort.SliceStable(res.Storages, func(i, j int) bool {
		oi, iok := order[res.Storages[i].Storage]
		oj, jok := order[res.Storages[j].Storage]
		if iok != jok {
			return iok
		}
		if iok {
			return oi < oj
		}
		return res.Storages[i].Storage.Key < res.Storages[j].Storage.Key
	})
	if cfg.mapFiles {
		res.maps = &fileMaps{memSize: memFileSize(res.Storages)}
	}
	err := readAll(ctx, res.Storages, res.Bytes, &cfg, res.maps)
	if res.maps != nil {
		res.maps.closeMem()
	}
	if err != nil {
		if res.maps != nil {
			res.maps.release()
		}
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// readAll reads every storage with cfg.workers goroutines, largest first.
// A worker that finds a storage better read in large segments (segmented:
// an object store) hands it to one stream that reads such storages one
// after the other with a constant number of segments in flight, across
// storage boundaries, as a parallel download of the file would.
func readAll(ctx context.Context, storages []*HostStorage, total int64, cfg *hostConfig, maps *fileMaps) error {
	jobs := append([]*HostStorage(nil), storages...)
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Storage.NBytes > jobs[j].Storage.NBytes })
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu   sync.Mutex
		done int64
		next int
		wg   sync.WaitGroup
	)
	report := func(n int64) {
		if cfg.progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		done += n
		cfg.progress(done, total)
	}
	take := func() *HostStorage {
		mu.Lock()
		defer mu.Unlock()
		if next == len(jobs) {
			return nil
		}
		next++
		return jobs[next-1]
	}
	st := &stream{in: make(chan *streamJob), report: report, maps: maps}
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		if err := st.run(ctx); err != nil {
			cancel(err)
		}
	}()
	for range min(cfg.workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for hs := take(); hs != nil && ctx.Err() == nil; hs = take() {
				if err := readStorage(ctx, hs, st, maps, report); err != nil {
					cancel(err)
				}
			}
		}()
	}
	wg.Wait()
	close(st.in)
	<-streamDone
	return context.Cause(ctx)
}

// storageError names the storage, its record and file, and its tensors.
func storageError(hs *HostStorage, err error) error {
	s := hs.Storage
	return fmt.Errorf("devicecopy: reading storage %s (record %s of %s, used by %s): %w",
		s.Key, s.Record, s.File, strings.Join(users(hs.Tensors, hs.Values), ", "), err)
}

// readStorage fills hs.Data from the file, checking the CRC32 and
// computing the digest piece by piece, or takes it from the file's
// mapping (maps, when not nil), or hands the storage to st when it is
// better read in large segments.
func readStorage(ctx context.Context, hs *HostStorage, st *stream, maps *fileMaps, report func(int64)) error {
	s := hs.Storage
	rc, err := s.Open()
	if err != nil {
		return storageError(hs, err)
	}
	if maps != nil {
		if f, base, ok := localFile(rc); ok {
			if data := maps.region(f, base, s.NBytes); data != nil {
				rc.Close()
				if err := hashMapped(ctx, hs, data, report); err != nil {
					if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
						return err
					}
					var crcErr *CRCError
					if errors.As(err, &crcErr) {
						return err
					}
					return storageError(hs, err)
				}
				return nil
			}
		}
	}
	if ra, base, ok := segmented(rc); ok && s.NBytes > pieceSize {
		select {
		case st.in <- &streamJob{hs: hs, ra: ra, base: base, rc: rc}:
			return nil
		case <-ctx.Done():
			rc.Close()
			return ctx.Err()
		}
	}
	defer rc.Close()
	buf := make([]byte, s.NBytes)
	d, err := digest.New(s.NBytes)
	if err != nil {
		return storageError(hs, err)
	}
	var crc uint32
	err = readPieces(ctx, rc, buf, func(piece []byte) {
		if s.HasCRC {
			crc = ieeecrc.Update(crc, piece)
		}
		d.Write(piece)
		report(int64(len(piece)))
	})
	if err == nil {
		hs.Digest, err = d.Sum()
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return err
		}
		return storageError(hs, err)
	}
	if s.HasCRC && crc != s.CRC32 {
		return &CRCError{File: s.File, Record: s.Record, Storage: s.Key, Tensors: users(hs.Tensors, hs.Values), Want: s.CRC32, Got: crc}
	}
	hs.Data, hs.CRCChecked = buf, s.HasCRC
	return nil
}

// readPieces fills buf from r a piece at a time, passing each piece to
// check once read.
func readPieces(ctx context.Context, r io.Reader, buf []byte, check func([]byte)) error {
	for off := 0; off < len(buf); {
		if err := ctx.Err(); err != nil {
			return err
		}
		piece := buf[off:min(off+pieceSize, len(buf))]
		if _, err := io.ReadFull(r, piece); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		check(piece)
		off += len(piece)
	}
	return nil
}

// segmented returns r's random access when a storage is better read in
// large segments: r offers random access (Storage.Open's reader does for
// bytes read in place) and is not a local file. A read from a local file
// costs no more when small, and a piece of 1 MiB is hashed right after
// its read, while it is in the CPU cache; a large read is hashed from
// memory, a third more memory traffic. Any other medium (an object store,
// where each read is a request or goes through a cache) gets segments.
//
// It also returns where r's bytes start in the file (or object), as far as
// the readers' Outer methods tell, for segments to start at round offsets
// there.
func segmented(r io.Reader) (io.ReaderAt, int64, bool) {
	ra, ok := r.(io.ReaderAt)
	if !ok {
		return nil, 0, false
	}
	outer, base := outermost(ra)
	if _, local := outer.(*os.File); local {
		return nil, 0, false
	}
	return ra, base, true
}
