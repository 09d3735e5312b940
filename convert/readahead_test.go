package convert

import (
	"os"
	"sync"
	"testing"
)

// TestReadAheadHints checks the read-ahead hints of tensors read from a
// local file: before any read, its chunk and the two after are asked
// for; every chunk of a file is asked for once, however many tensors and
// goroutines read it (two shards reading two halves at once); other
// files have their own record.
func TestReadAheadHints(t *testing.T) {
	var mu sync.Mutex
	asked := map[*os.File]map[int64]int{}
	defer func(f func(*os.File, int64, int64)) { willNeed = f }(willNeed)
	willNeed = func(f *os.File, off, n int64) {
		if off%readAheadChunk != 0 || n%readAheadChunk != 0 || n <= 0 {
			t.Errorf("hint %d+%d is not whole chunks", off, n)
		}
		mu.Lock()
		defer mu.Unlock()
		if asked[f] == nil {
			asked[f] = map[int64]int{}
		}
		for k := off / readAheadChunk; k < (off+n)/readAheadChunk; k++ {
			asked[f][k]++
		}
	}
	a := &readAheads{}
	f1, f2 := new(os.File), new(os.File)
	const size = 40 * readAheadChunk
	var wg sync.WaitGroup
	for _, half := range []int64{0, size / 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Tensors of 3 MiB read in pieces of 512 KiB.
			for at := half; at < half+size/2; at += 512 << 10 {
				a.hint(f1, at)
				mu.Lock()
				for k := at / readAheadChunk; k <= at/readAheadChunk+2; k++ {
					if asked[f1][k] == 0 {
						t.Errorf("read at %d: chunk %d not asked for", at, k)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	a.hint(f2, 5*readAheadChunk)
	for k, n := range asked[f1] {
		if n != 1 {
			t.Errorf("chunk %d asked for %d times, want once", k, n)
		}
	}
	if len(asked[f1]) != 42 {
		t.Errorf("%d chunks asked for, want 42 (40 read and 2 past the end)", len(asked[f1]))
	}
	if len(asked[f2]) != 3 || asked[f2][5] != 1 || asked[f2][7] != 1 {
		t.Errorf("second file: %v, want chunks 5, 6 and 7 once", asked[f2])
	}
}
