package lora

import (
	"runtime"
	"sync"
)

// colBlock is the number of columns AddMatMulT works on at a time: their
// rows of rt (colBlock * r float32s, 32 KiB at rank 16) stay in the
// first-level cache while every row of c goes by.
const colBlock = 512

// AddMatMulT adds s * l @ rt.T to c: c is (m, n), l is (m, r), rt is
// (n, r), all row-major float32. Each element is
// c[i,j] += s * (sum over k in order of l[i,k]*rt[j,k]), the sum in
// float32; rows are split over all CPUs and columns blocked so that rt's
// block stays in cache.
func AddMatMulT(c, l, rt []float32, m, n, r int, s float32) {
	if m == 0 || n == 0 || r == 0 {
		return
	}
	_ = c[m*n-1]
	_ = l[m*r-1]
	_ = rt[n*r-1]
	parallel(m, func(lo, hi int) {
		for jb := 0; jb < n; jb += colBlock {
			je := min(jb+colBlock, n)
			for i := lo; i < hi; i++ {
				li := l[i*r : i*r+r]
				ci := c[i*n : i*n+n]
				j := jb
				for ; j+4 <= je; j += 4 {
					r0 := rt[j*r : j*r+r]
					r1 := rt[(j+1)*r : (j+1)*r+r]
					r2 := rt[(j+2)*r : (j+2)*r+r]
					r3 := rt[(j+3)*r : (j+3)*r+r]
					var d0, d1, d2, d3 float32
					for k, lk := range li {
						d0 += lk * r0[k]
						d1 += lk * r1[k]
						d2 += lk * r2[k]
						d3 += lk * r3[k]
					}
					ci[j] += s * d0
					ci[j+1] += s * d1
					ci[j+2] += s * d2
					ci[j+3] += s * d3
				}
				for ; j < je; j++ {
					rj := rt[j*r : j*r+r]
					var d float32
					for k, lk := range li {
						d += lk * rj[k]
					}
					ci[j] += s * d
				}
			}
		}
	})
}

// parallel runs fn over [0, n) split in contiguous pieces, one per CPU.
func parallel(n int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 || n < 64 {
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
