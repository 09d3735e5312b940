package devicecopy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/internal/ieeecrc"
	"github.com/ckpt-dev/ckpt/statedict"
)

// How Upload reads: the storages are cut into pieces of one staging buffer
// each, in file order. A dispatcher hands each piece a free buffer and
// passes it to one of several readers, which read it (ReadAt), compute its
// chunk digests and chunk CRC32s while the bytes are in the CPU's cache,
// and swap big-endian bytes. This goroutine takes the pieces back in file
// order and queues each copy on its device's copy stream; a buffer is
// free again once its copy is queued, and a reader waits for that copy to
// land before reading into it. Several reads in flight is what lets the
// page cache (or a disk's queue) give more than one core's memcpy: on an
// H200 machine, one reader held a 4 GB warm load to 4 GB/s, under
// safetensors' load_file (docs/gpu/).

// piece is one staging buffer's worth of one storage.
type piece struct {
	ds   *DeviceStorage
	ra   io.ReaderAt
	off  int64 // in the storage
	n    int
	k    int        // staging buffer; -1 for none (an empty storage, an error)
	last bool       // the storage's last piece
	done chan error // capacity 1: the read's result
}

// readers is how many pieces are read at once: the hashing concurrency,
// leaving two buffers for copies in flight.
func (u *uploader) readers() int {
	return max(1, min(u.cfg.workers, len(u.staging)-2))
}

// stream reads every storage through the staging buffers and queues the
// copies; a storage whose copies are queued goes to its arena's verify
// queue. It returns once no reader touches a staging buffer.
func (u *uploader) stream(parent context.Context, verifyQ map[*Arena]chan verifyItem) (err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	free := make(chan int, len(u.staging))
	for k := range u.staging {
		free <- k
	}
	work := make(chan *piece)
	order := make(chan *piece, len(u.staging))
	var readNanos atomic.Int64
	var rwg sync.WaitGroup
	n := u.readers()
	for range n {
		rwg.Go(func() {
			for p := range work {
				p.done <- u.read(p, &readNanos)
			}
		})
	}
	go u.dispatch(ctx, free, work, order)
	defer func() {
		cancel()
		for p := range order { // drain: the dispatcher stops, the readers finish
			if p.k >= 0 {
				<-p.done
			}
		}
		rwg.Wait()
		u.st.ReadTime = time.Duration(readNanos.Load() / int64(n))
	}()
	for p := range order {
		if err := <-p.done; err != nil {
			return err
		}
		ds := p.ds
		if p.n > 0 {
			a := ds.arena
			if err := a.ctx.MemcpyHtoDAsync(ds.Ptr+cuda.DevicePtr(p.off), u.staging[p.k][:p.n], a.copyStream); err != nil {
				return err
			}
			if err := a.ctx.RecordEvent(a.bufEvents[p.k], a.copyStream); err != nil {
				return err
			}
			u.bufArena[p.k] = a
			free <- p.k
			u.done += int64(p.n)
			if u.cfg.progress != nil {
				u.cfg.progress(u.done, u.st.Bytes)
			}
		}
		if q := verifyQ[ds.arena]; p.last && q != nil && ds.Storage.NBytes > 0 {
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
	return parent.Err()
}

// dispatch cuts the storages into pieces, in file order, and hands each one
// a free staging buffer and a reader; order gets every piece first, so
// that stream takes them back in file order. It closes both channels when
// done or cancelled.
func (u *uploader) dispatch(ctx context.Context, free <-chan int, work, order chan<- *piece) {
	defer close(order)
	defer close(work)
	send := func(p *piece) bool {
		select {
		case order <- p:
		case <-ctx.Done():
			return false
		}
		if p.k < 0 {
			return true
		}
		select {
		case work <- p:
			return true
		case <-ctx.Done():
			p.done <- ctx.Err() // stream drains order and waits for done
			return false
		}
	}
	for _, ds := range u.st.Storages {
		s := ds.Storage
		ds.sums = make([]uint64, digest.ChunkCount(s.NBytes))
		if ds.Swapped {
			ds.fileSums = make([]uint64, len(ds.sums))
		}
		if s.HasCRC {
			ds.crcs = make([]uint32, len(ds.sums))
		}
		if s.NBytes == 0 {
			done := make(chan error, 1)
			done <- nil
			if !send(&piece{ds: ds, k: -1, last: true, done: done}) {
				return
			}
			continue
		}
		ra, err := s.ReaderAt()
		if err != nil {
			done := make(chan error, 1)
			done <- readFailure(ds, err)
			send(&piece{ds: ds, k: -1, done: done})
			return
		}
		for off := int64(0); off < s.NBytes; off += int64(u.cfg.bufSize) {
			var k int
			select {
			case k = <-free:
			case <-ctx.Done():
				return
			}
			p := &piece{ds: ds, ra: ra, off: off, n: int(min(int64(u.cfg.bufSize), s.NBytes-off)), k: k, done: make(chan error, 1)}
			p.last = off+int64(p.n) == s.NBytes
			if !send(p) {
				return
			}
		}
	}
}

// read fills the piece's staging buffer once its last copy has landed,
// hashes it, and swaps a big-endian storage's bytes.
func (u *uploader) read(p *piece, nanos *atomic.Int64) error {
	if err := u.waitBuffer(p.k); err != nil {
		return err
	}
	ds, s := p.ds, p.ds.Storage
	buf := u.staging[p.k][:p.n]
	t0 := time.Now()
	got, err := p.ra.ReadAt(buf, p.off)
	nanos.Add(int64(time.Since(t0)))
	if got == len(buf) {
		err = nil // io.ReaderAt may report io.EOF with the last byte
	} else if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return readFailure(ds, err)
	}
	first := p.off / digest.ChunkSize
	cnt := digest.ChunkCount(int64(p.n))
	var crcs []uint32
	if s.HasCRC {
		crcs = ds.crcs[first : first+cnt] // over the bytes as stored
	}
	if ds.Swapped {
		hashPiece(buf, ds.fileSums[first:first+cnt], crcs, first)
		statedict.SwapBytes(buf, s.DType.SwapUnit())
		crcs = nil
	}
	hashPiece(buf, ds.sums[first:first+cnt], crcs, first)
	return nil
}

func readFailure(ds *DeviceStorage, err error) error {
	s := ds.Storage
	return fmt.Errorf("devicecopy: reading storage %s (record %s of %s, used by %s): %w",
		s.Key, s.Record, s.File, strings.Join(users(ds.Tensors, ds.Values), ", "), err)
}

// waitBuffer waits until staging buffer k's last copy has landed.
func (u *uploader) waitBuffer(k int) error {
	if a := u.bufArena[k]; a != nil {
		return a.ctx.SynchronizeEvent(a.bufEvents[k])
	}
	return nil
}

// hashPiece writes the chunk digests of piece, whose first chunk has index
// first, to sums, and their CRC32s to crcs unless it is nil. A piece starts
// on a chunk boundary; only a storage's last piece may end inside a chunk.
func hashPiece(piece []byte, sums []uint64, crcs []uint32, first int64) {
	var b batch
	flush := func() {
		if b.n == 0 {
			return
		}
		digest.ChunkSums(b.chunks[:b.n], b.index[:b.n], b.sums[:b.n])
		for k := range b.n {
			i := int64(b.index[k]) - first
			sums[i] = b.sums[k]
			if crcs != nil {
				crcs[i] = ieeecrc.Checksum(b.chunks[k])
			}
		}
		b.n = 0
	}
	for i := range sums {
		c := piece[i*digest.ChunkSize : min((i+1)*digest.ChunkSize, len(piece))]
		if b.add(first+int64(i), c) {
			flush()
		}
	}
	flush()
}
