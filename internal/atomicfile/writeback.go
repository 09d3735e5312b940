package atomicfile

import (
	"math"
	"strconv"
	"strings"
	"sync/atomic"
)

// Whether an output waits for the disk. By default a conversion's local
// outputs are not synced, as cp, rclone and torch.save do not sync: their
// first bytes are written through the page cache and left to the kernel's
// write-back, up to the kernel's free-run ceiling less the pages already
// dirty or under write-back (the midpoint of the background and the dirty
// thresholds, below which the kernel never throttles a writer:
// dirty_freerun_ceiling in mm/page-writeback.c), and the rest written
// behind (writebehind.go: each window handed to the disk at once and
// dropped from the cache once there), which past that point is faster
// than buffered writes the kernel throttles and leaves no more dirty
// pages behind (direct I/O before 2026-11-28, session 17). Until 2026-11-28 the
// budget was half the background threshold (1.1 GB of 23 GB available),
// which sent most of a 4 GB output to the disk at its speed while cp left
// all of it to write-back (docs/benchmarks.md). On a disk the source is
// read from too (a local MinIO, a cold local file) the page-cache share is
// what makes a 1 GB conversion as fast as a download: a durable write
// moves twice the bytes across the disk while it runs.
// convert.WithSync(true) writes everything behind and syncs each output
// before naming it (a File created without a budget).

// WriteBackBudget returns how many bytes of output may go to the page
// cache (see freerunNow): the budget to share among the outputs of
// one conversion (NewBudget). A variable, for tests.
var WriteBackBudget = freerunNow

// NewBudget returns a budget of n bytes that may go through the page
// cache, shared by every File created with it.
func NewBudget(n int64) *atomic.Int64 {
	b := new(atomic.Int64)
	b.Store(max(n, 0))
	return b
}

// Unlimited is a budget that sends everything through the page cache (a
// temporary file that is read back and removed).
func Unlimited() *atomic.Int64 { return NewBudget(math.MaxInt64) }

// threshold computes one of the kernel's dirty-page thresholds from what
// /proc and the cgroup file system say (empty where unknown): vm's
// dirty_background_bytes or dirty_bytes when set, otherwise the ratio
// (dirty_background_ratio or dirty_ratio) percent of the memory available
// (MemAvailable of /proc/meminfo, or what the cgroup's memory.max leaves
// beside memory.current when that is less). Anything unreadable gives 0.
func threshold(bytes, ratio, meminfo, cgMax, cgCur string) int64 {
	if n, err := strconv.ParseInt(strings.TrimSpace(bytes), 10, 64); err == nil && n > 0 {
		return n
	}
	pct, err := strconv.ParseInt(strings.TrimSpace(ratio), 10, 64)
	if err != nil || pct <= 0 || pct > 100 {
		return 0
	}
	avail := int64(-1)
	for _, line := range strings.Split(meminfo, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "MemAvailable:" && f[2] == "kB" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil && kb >= 0 && kb < math.MaxInt64/1024 {
				avail = kb * 1024
			}
		}
	}
	if avail < 0 {
		return 0
	}
	if limit, err := strconv.ParseInt(strings.TrimSpace(cgMax), 10, 64); err == nil {
		cur, _ := strconv.ParseInt(strings.TrimSpace(cgCur), 10, 64)
		if left := limit - cur; left < avail {
			avail = max(left, 0)
		}
	}
	return avail / 100 * pct
}

// freerunBudget is the page cache a conversion's outputs may take without
// the kernel throttling their writes: the free-run ceiling, (background +
// dirty threshold) / 2 (the kernel halves a background threshold that is
// not below the dirty one), less the pages dirty or under write-back now
// (Dirty and Writeback of /proc/meminfo). 0 when the dirty threshold is
// unknown.
func freerunBudget(bg, dirty int64, meminfo string) int64 {
	if dirty <= 0 {
		return 0
	}
	if bg <= 0 || bg >= dirty {
		bg = dirty / 2
	}
	left := bg/2 + dirty/2
	for _, line := range strings.Split(meminfo, "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (f[0] == "Dirty:" || f[0] == "Writeback:") && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
				return 0
			}
			left -= kb * 1024
		}
	}
	return max(left, 0)
}
