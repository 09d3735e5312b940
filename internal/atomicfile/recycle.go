package atomicfile

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
// s. So a Writer measures what its page-cache writes cost, one write in
// probeEvery (the two clocks cost 6 us a write here): the CPU time of its
// writing thread across the write (the host's faults are charged there;
// waiting for a CPU is not), counted only where the write began and
// ended on the same thread (a goroutine that moved between threads would
// be charged another thread's work). Once dearProbes such writes in a
// row cost more than slowWrite each (three to seven times what they cost
// when pages are cheap), the rest of its budget's bytes are recycled:
// written behind (writebehind.go), each window handed to the disk at
// once and dropped from the cache once the disk has it, so that later
// writes reuse those pages. Recycled windows are waited for as those past
// the budget are: dropped without waiting, the pages still under
// write-back stayed in the cache, and a 4 GB merge in such minutes took
// 1.97-2.38 s that way against 1.64-1.75 s waiting (cp 0.75-9.00 s in the
// same rounds).

const (
	// probeEvery: one page-cache write in probeEvery is measured.
	probeEvery = 8
	// dearProbes is how many measured writes in a row must be dear to
	// turn a Writer to recycling.
	dearProbes = 4
	// slowWrite is the CPU time a write may take, in nanoseconds a
	// byte, before it counts as dear: 1 GB/s (cheap pages: 0.13-0.38
	// ns a byte over 8 MiB here; dear ones 2-4).
	slowWrite = 1.0
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

// threadCPU is sysThreadCPU; a variable, for tests.
var threadCPU = sysThreadCPU

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
		bh.wrote(off, off+int64(len(b)))
		return nil
	}
	w.writes++
	if w.writes%probeEvery != 1 {
		return w.writeCached(b, off)
	}
	tid, cpu := threadCPU()
	if err := w.writeCached(b, off); err != nil {
		return err
	}
	tid2, cpu2 := threadCPU()
	if tid == 0 || tid2 != tid {
		return nil
	}
	if float64(cpu2-cpu) > slowWrite*float64(len(b)) {
		w.dear++
	} else {
		w.dear = 0
	}
	if w.dear >= dearProbes {
		w.recycled.Store(true)
	}
	return nil
}
