package convert

import (
	"os"
	"sync"

	"github.com/ckpt-dev/ckpt/internal/fadvise"
)

// Tensors copied from a local file ask the kernel to read ahead of them
// (fadvise.WillNeed), past their own end too: torch.save and safetensors
// put the next tensor's bytes right after. On a cold input the kernel's
// own read-ahead, restarted small by every record's header read before,
// kept the disk idle between reads: a 1 GB pth was read at 1.5 GB/s where
// cat reads it at 4 GB/s (docs/benchmarks.md). The file is asked for in
// chunks of readAheadChunk, the one being read and the two after, each
// chunk once per conversion whatever the number of tensors or of shards
// reading it at once: over bytes already in the page cache each hint
// costs a walk of its pages (4 ms a GB).

// readAheadChunk is the unit a source file is asked for in.
const readAheadChunk = 16 << 20

// willNeed is fadvise.WillNeed; a variable, for tests.
var willNeed = fadvise.WillNeed

// readAheads records, per source file, the chunks asked for.
type readAheads struct {
	mu   sync.Mutex
	done map[*os.File][]uint64 // bit k: chunk k asked for
}

// hint asks for the chunk of f holding offset at and the two after,
// those not asked for yet.
func (a *readAheads) hint(f *os.File, at int64) {
	if at < 0 {
		return
	}
	first := at / readAheadChunk
	from, to := int64(-1), int64(-1)
	a.mu.Lock()
	if a.done == nil {
		a.done = map[*os.File][]uint64{}
	}
	bits := a.done[f]
	for k := first; k <= first+2; k++ {
		w, b := int(k/64), uint64(1)<<(k%64)
		for len(bits) <= w {
			bits = append(bits, 0)
		}
		if bits[w]&b == 0 {
			bits[w] |= b
			if from < 0 {
				from = k
			}
			to = k + 1
		}
	}
	a.done[f] = bits
	a.mu.Unlock()
	if from >= 0 {
		willNeed(f, from*readAheadChunk, (to-from)*readAheadChunk)
	}
}
