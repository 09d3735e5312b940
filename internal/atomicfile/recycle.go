package atomicfile

import "sync/atomic"

// Recycling. The page cache an output's first bytes take (the budget's
// share, left to the kernel's write-back as cp leaves them) is fresh
// memory, and on some machines fresh memory is dear: in a VM whose host
// has taken back the guest's free pages (free page reporting, a balloon),
// every page the kernel takes from free memory is a fault in the host,
// and in a cgroup near its memory limit every page is reclaimed from
// someone first. On the 2-core VM of docs/benchmarks.md, in the minutes
// when that happened, 1 GB written through the page cache took 2.8-4.9 s
// (2.1-3.3 s of system time; cp alike) against 0.15 s otherwise, and the
// same 1 GB written behind with its pages dropped and reused took 0.4-0.96
// s. So a Writer measures what its page-cache writes cost: the CPU time
// of its writing thread (the host's faults are charged there; waiting for
// a CPU is not) over each probeSpan bytes. Where two spans in a row cost
// more than slowWrite (ten times what they cost when pages are cheap),
// the rest of its budget's bytes are recycled: written through the page
// cache as before, each window handed to the disk at once and dropped
// from the cache once the disk has it, without waiting for it
// (writebehind.go), so that later writes reuse those pages. Bytes past the
// budget are written behind as before.

const (
	// probeSpan is how many bytes a cost probe spans.
	probeSpan = 8 << 20
	// slowWrite is the CPU time a probe's bytes may take, in
	// nanoseconds a byte (2 GB/s; cheap pages: 6-7 GB/s here).
	slowWrite = 0.5
)

// RecycleMode says when a Writer recycles its page cache (see above).
type RecycleMode int32

const (
	// RecycleWhenSlow recycles once writes through the page cache are
	// found to cost more than slowWrite (the default).
	RecycleWhenSlow RecycleMode = iota
	// RecycleNever leaves the budget's bytes to the kernel's write-back.
	RecycleNever
	// RecycleAlways recycles from the first byte.
	RecycleAlways
)

// Recycle is when Writers recycle their page cache. A variable, for tests
// and comparisons.
var Recycle = RecycleWhenSlow

// probe is a Writer's measure of its page-cache writes.
type probe struct {
	tid   int   // the thread the span began on (threadCPU), 0: none
	cpu   int64 // its CPU time then, nanoseconds
	bytes int64 // written in the span so far
	slow  int   // spans in a row over slowWrite
}

// recycling is whether w recycles its budget's bytes now.
func (w *Writer) recycling() bool { return w.recycled.Load() }

// writeBudget writes b at off through the page cache, as bytes of the
// budget: recycled where w recycles, and measured until it does.
func (w *Writer) writeBudget(b []byte, off int64) error {
	bh, ok := w.direct.(*behind)
	if !ok || Recycle == RecycleNever {
		return w.writeCached(b, off)
	}
	if w.recycling() || Recycle == RecycleAlways {
		if err := w.writeCached(b, off); err != nil {
			return err
		}
		bh.wrote(off, off+int64(len(b)), false)
		return nil
	}
	p := &w.probe
	if p.bytes == 0 {
		p.tid, p.cpu = threadCPU()
	}
	if err := w.writeCached(b, off); err != nil {
		return err
	}
	if p.bytes += int64(len(b)); p.bytes >= probeSpan {
		tid, cpu := threadCPU()
		if tid != 0 && tid == p.tid && float64(cpu-p.cpu) > slowWrite*float64(p.bytes) {
			p.slow++
		} else if tid == p.tid {
			p.slow = 0
		}
		p.bytes = 0
		if p.slow >= 2 {
			w.recycled.Store(true)
			slowProbes.Add(1)
		}
	}
	return nil
}

// slowProbes counts the Writers that turned to recycling (for tests).
var slowProbes atomic.Int64

// threadCPU is sysThreadCPU; a variable, for tests.
var threadCPU = sysThreadCPU
