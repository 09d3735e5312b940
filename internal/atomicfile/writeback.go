package atomicfile

import (
	"math"
	"strconv"
	"strings"
	"sync/atomic"
)

// Whether an output waits for the disk. By default a conversion's local
// outputs are not synced, as cp, rclone and torch.save do not sync: their
// first bytes, up to half the kernel's background write-back threshold in
// all, are written through the page cache and left to the kernel's
// write-back, and the rest with direct I/O, which at that size is faster
// than buffered writes that meet the kernel's dirty-page throttling (and
// leaves no dirty pages behind). On a disk the source is read from too (a
// local MinIO, a cold local file) the page-cache share is what makes a
// 1 GB conversion as fast as a download: a durable write moves twice the
// bytes across the disk while it runs (docs/benchmarks.md).
// convert.WithSync(true) writes everything directly and syncs each output
// before naming it (a File created without a budget).

// pageCacheShare is the share of the kernel's background write-back
// threshold that a conversion's outputs may take in the page cache: with
// half of it, the outputs start no write-back of their own, and the rest
// is left to whatever else is writing.
const pageCacheShare = 2

// WriteBackBudget returns how many bytes of output may go to the page
// cache (see writeBackThreshold): the budget to share among the outputs of
// one conversion (NewBudget). A variable, for tests.
var WriteBackBudget = func() int64 { return writeBackThreshold() / pageCacheShare }

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

// backgroundThreshold computes the kernel's background write-back threshold
// from what /proc and the cgroup file system say (empty where unknown):
// vm/dirty_background_bytes when set, otherwise vm/dirty_background_ratio
// percent of the memory available (MemAvailable of /proc/meminfo, or what
// the cgroup's memory.max leaves beside memory.current when that is less).
// Anything unreadable gives 0: no output bytes go through the page cache.
func backgroundThreshold(bgBytes, bgRatio, meminfo, cgMax, cgCur string) int64 {
	if n, err := strconv.ParseInt(strings.TrimSpace(bgBytes), 10, 64); err == nil && n > 0 {
		return n
	}
	ratio, err := strconv.ParseInt(strings.TrimSpace(bgRatio), 10, 64)
	if err != nil || ratio <= 0 || ratio > 100 {
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
	return avail / 100 * ratio
}
