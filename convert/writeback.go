package convert

import (
	"math"
	"strconv"
	"strings"
)

// Whether an output waits for the disk. A conversion whose outputs are
// small next to the kernel's dirty-page budget writes them through the page
// cache and gives them their names without fsync, as cp, rclone and
// torch.save do: the kernel writes them out in the background, and the
// conversion does not spend the disk's time on them. On a disk that the
// source is read from too (a local MinIO, a cold local file) that is most
// of a 1 GB conversion: a durable write moves twice the bytes across the
// disk while it runs (docs/benchmarks.md). Larger outputs are written with
// direct I/O and synced: at that size buffered writes meet the kernel's
// dirty-page throttling and direct I/O is the faster way, so they are on
// the disk when Convert returns anyway. WithSync(true) asks that of every
// output.

// pageCacheShare is the share of the kernel's background write-back
// threshold that a conversion's outputs may take in the page cache: with
// half of it, the outputs start no write-back of their own, and the rest
// is left to whatever else is writing.
const pageCacheShare = 2

// writeBackBudget returns how many bytes of output may be left in the page
// cache (see writeBackThreshold); a variable for tests.
var writeBackBudget = func() int64 { return writeBackThreshold() / pageCacheShare }

// chooseWriteBack decides, from the plan's output bytes, whether this
// conversion's local outputs are left to the kernel's write-back (lazy) or
// written directly and synced.
func (c *config) chooseWriteBack(p *plan) {
	if c.sync || c.dest != nil {
		c.lazy = false
		return
	}
	var total int64
	for _, it := range p.items {
		n := it.nbytesSat()
		if n > math.MaxInt64-total {
			total = math.MaxInt64
			break
		}
		total += n
	}
	c.lazy = total <= writeBackBudget()
}

// backgroundThreshold computes the kernel's background write-back threshold
// from what /proc and the cgroup file system say (empty where unknown):
// vm/dirty_background_bytes when set, otherwise vm/dirty_background_ratio
// percent of the memory available (MemAvailable of /proc/meminfo, or what
// the cgroup's memory.max leaves beside memory.current when that is less).
// Anything unreadable gives 0: every output is synced.
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
