// Package par splits a range of work over the CPUs.
package par

import (
	"runtime"
	"sync"
)

// Range runs fn over [0, n) split into contiguous pieces, one per CPU
// (runtime.GOMAXPROCS), none smaller than minPiece; with one piece it
// runs fn(0, n) on the caller's goroutine. It returns when every piece
// is done.
func Range(n, minPiece int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minPiece, 1))
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	step := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += step {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+step, n))
	}
	wg.Wait()
}
