package devicecopy

import (
	"context"
	"io"
	"sync"

	"github.com/ckpt-dev/ckpt/statedict"
)

// How storages with random access on anything but a local file (an object
// store) are read: one stream of segments, each one ReadAt straight into
// its storage's buffer, streamDepth of them in flight at a time whatever
// the storage boundaries, so that the server sees what a parallel download
// of the file shows it: requests in file order (largest storage first
// among those of different sizes), a constant number at once. Large reads
// let objstore.Object fetch each segment with parallel ranged GETs into
// the buffer rather than copying through its chunk cache; the buffer being
// the destination, read-ahead costs no memory.
//
// The bytes are checked as they arrive: a reader that reports the pieces
// of a read (statedict.PieceReaderAt, as objstore's does for each MiB of
// each GET) has them hashed on the goroutine that read them, while they are
// in the CPU's cache and in parallel with the other requests; any other
// reader's segment is hashed by the goroutine that read it, once read. The
// stream's own goroutine only hashes the chunks that straddle pieces and
// checks each storage as its last segment completes.
//
// With WithFileMapping, a storage whose reader streams (objstore's
// ReadAtStream) is received into the load's memory file instead of a
// buffer of its own: same segments, same checks (memfile.go).
//
// A local file is not read this way: a read from it costs no more when
// small, and its 1 MiB pieces are hashed right after each read, while in
// the CPU's cache (reading 16 MiB segments there made BenchmarkLoadHost
// about 1.45x slower).
const (
	// 32 MiB segments, 8 at once: one 32 MiB GET each from objstore
	// (DefaultDirectGetSize), as many requests in flight as rclone's 8
	// streams. Against 16 MiB segments of two 8 MiB GETs, 12 at once, a
	// warm 4 GB load from MinIO took about a fifth less of the server's
	// CPU; with 6 at once instead of 8, a cold one (the server reading its
	// disk) was 10-40% slower than rclone (docs/benchmarks.md).
	segmentSize = 32 << 20
	streamDepth = 8
)

// stream reads the storages that workers hand it (in), one after another.
type stream struct {
	in        chan *streamJob
	report    func(int64)
	maps      *fileMaps         // WithFileMapping: the memory file (memfile.go)
	scratch   []byte            // for chunkSums.reread: run's goroutine only
	completed chan *segmentRead // reads that ended (capacity streamDepth: never blocks)
	wg        sync.WaitGroup    // segment reads under way
}

// streamJob is one storage to read: its reader (positioned at base in the
// file), and once started its buffer, checksums and segments.
type streamJob struct {
	hs   *HostStorage
	ra   io.ReaderAt
	base int64
	rc   io.Closer

	buf    []byte
	sums   *chunkSums
	bounds []int // segment k is buf[bounds[k]:bounds[k+1]]
	next   int   // next segment to start

	// Received into the memory file (memfile.go) rather than buf: the
	// reader, and the storage's place in the file and its mapping.
	sr      streamReaderAt
	mem     *memFile
	memOff  int64
	memData []byte
}

// segmentRead is one segment started.
type segmentRead struct {
	j     *streamJob
	k     int
	ended bool // the read returned (set by run when it hears of it)
	err   error
}

// start gives the job its place in the load's memory file (toMemFile) or
// allocates its buffer, and splits it into segments that end at
// multiples of segmentSize in the file, so that the requests of an object
// store fall on the server's block boundaries (see
// objstore.Object.ReadAtPieces); the first and the last segment are half a
// segment to one and a half long.
func (j *streamJob) start(st *stream) {
	n := int(j.hs.Storage.NBytes)
	if !j.toMemFile(st) {
		j.buf = make([]byte, n)
		j.sums = newChunkSums(j.buf, int64(n), j.hs.Storage.HasCRC)
	}
	j.bounds = []int{0}
	at := segmentSize - int(j.base%segmentSize)
	if at < segmentSize/2 {
		at += segmentSize
	}
	for ; at <= n-segmentSize/2; at += segmentSize {
		j.bounds = append(j.bounds, at)
	}
	j.bounds = append(j.bounds, n)
}

// launch starts reading segment k of j.
func (st *stream) launch(ctx context.Context, j *streamJob, k int) *segmentRead {
	r := &segmentRead{j: j, k: k}
	off := int64(j.bounds[k])
	st.wg.Add(1)
	if j.mem != nil {
		go func() {
			defer st.wg.Done()
			r.err = j.receive(ctx, off, int64(j.bounds[k+1]-j.bounds[k]))
			st.completed <- r
		}()
		return r
	}
	seg := j.buf[j.bounds[k]:j.bounds[k+1]]
	go func() {
		defer st.wg.Done()
		// The pages are faulted in beside the request, not by it
		// (prefault_linux.go).
		go prefault(seg)
		var got int
		var err error
		pr, pieces := j.ra.(statedict.PieceReaderAt)
		if pieces {
			got, err = pr.ReadAtPieces(seg, off, j.sums.landed)
		} else {
			got, err = j.ra.ReadAt(seg, off)
		}
		if got == len(seg) {
			err = nil
			if !pieces {
				j.sums.landed(seg, off)
			}
		} else if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		r.err = err
		st.completed <- r
	}()
	return r
}

// run reads the jobs handed to it until in is closed and every job is
// read, or the first error. A new segment starts as soon as fewer than
// streamDepth are being read, whether or not the segments before it are
// done: a slow request holds up no other (the segments are checked and
// reported in order, as they become the oldest). It returns only once no
// read is writing to a buffer, and closes every job's reader.
func (st *stream) run(ctx context.Context) (err error) {
	var (
		queue    []*segmentRead // started and not yet checked, in order
		inflight int            // reads under way
		cur      *streamJob     // the job whose segments are being started
		open     []*streamJob   // jobs received and not finished
		in       = st.in
	)
	st.completed = make(chan *segmentRead, streamDepth)
	defer func() {
		st.wg.Wait()
		for _, j := range open {
			j.rc.Close()
		}
		if err != nil && in != nil {
			// Take (and close) what workers still hand over until
			// they see the cancellation.
			for j := range in {
				j.rc.Close()
			}
		}
	}()
	for {
		for inflight < streamDepth && cur != nil && cur.next < len(cur.bounds)-1 {
			queue = append(queue, st.launch(ctx, cur, cur.next))
			inflight++
			cur.next++
		}
		if cur != nil && cur.next == len(cur.bounds)-1 {
			cur = nil
		}
		for len(queue) > 0 && queue[0].ended {
			r := queue[0]
			queue = queue[1:]
			if err := st.check(r, &open); err != nil {
				return err
			}
		}
		if len(queue) == 0 && in == nil && cur == nil {
			return nil
		}
		var recv chan *streamJob // receive only when a new job can start
		if cur == nil && inflight < streamDepth {
			recv = in
		}
		select {
		case r := <-st.completed:
			inflight--
			r.ended = true
			if r.err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return storageError(r.j.hs, r.err)
			}
		case j, ok := <-recv:
			if !ok {
				in = nil
				continue
			}
			j.start(st)
			open = append(open, j)
			cur = j
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// check takes a read segment, the oldest not yet checked: it hashes what
// no piece covered, reports its bytes, and finishes its job after the
// job's last segment.
func (st *stream) check(r *segmentRead, open *[]*streamJob) error {
	j := r.j
	end := j.bounds[r.k+1]
	if err := j.sums.fill(int64(end)); err != nil {
		return storageError(j.hs, err)
	}
	st.report(int64(end - j.bounds[r.k]))
	if r.k < len(j.bounds)-2 {
		return nil
	}
	for i, o := range *open {
		if o == j {
			*open = append((*open)[:i], (*open)[i+1:]...)
			break
		}
	}
	return st.finish(j)
}

// finish checks a job whose segments are all read and keeps its bytes.
func (st *stream) finish(j *streamJob) error {
	j.rc.Close()
	hs, s := j.hs, j.hs.Storage
	d, crc, err := j.sums.finish()
	if err != nil {
		return storageError(hs, err)
	}
	if s.HasCRC && crc != s.CRC32 {
		return &CRCError{File: s.File, Record: s.Record, Storage: s.Key, Tensors: users(hs.Tensors, hs.Values), Want: s.CRC32, Got: crc}
	}
	hs.Digest, hs.Data, hs.CRCChecked = d, j.buf, s.HasCRC
	if j.mem != nil {
		hs.Data, hs.MemFile = j.memData, true
	}
	return nil
}
