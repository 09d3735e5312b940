package lora

import "github.com/ckpt-dev/ckpt/internal/par"

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
			i := lo
			for ; i+2 <= hi; i += 2 {
				addRows2(c[i*n:(i+2)*n], l[i*r:(i+2)*r], rt, n, r, jb, je, s)
			}
			for ; i < hi; i++ {
				addRow(c[i*n:(i+1)*n], l[i*r:(i+1)*r], rt, r, jb, je, s)
			}
		}
	})
}

// addRows2 does two rows of c at once, columns jb to je, four at a time:
// each element of rt loaded serves both rows.
func addRows2(c, l, rt []float32, n, r, jb, je int, s float32) {
	l0, l1 := l[:r:r], l[r:2*r:2*r]
	c0, c1 := c[:n:n], c[n:2*n:2*n]
	j := jb
	for ; j+4 <= je; j += 4 {
		q := rt[j*r : (j+4)*r : (j+4)*r]
		r0, r1, r2, r3 := q[:r:r], q[r:2*r:2*r], q[2*r:3*r:3*r], q[3*r:]
		var a0, a1, a2, a3, b0, b1, b2, b3 float32
		for k := range l0 {
			x, y := l0[k], l1[k]
			a0 += x * r0[k]
			a1 += x * r1[k]
			a2 += x * r2[k]
			a3 += x * r3[k]
			b0 += y * r0[k]
			b1 += y * r1[k]
			b2 += y * r2[k]
			b3 += y * r3[k]
		}
		c0[j] += s * a0
		c0[j+1] += s * a1
		c0[j+2] += s * a2
		c0[j+3] += s * a3
		c1[j] += s * b0
		c1[j+1] += s * b1
		c1[j+2] += s * b2
		c1[j+3] += s * b3
	}
	if j < je {
		addRow(c0, l0, rt, r, j, je, s)
		addRow(c1, l1, rt, r, j, je, s)
	}
}

// addRow does one row of c, columns jb to je.
func addRow(c, l, rt []float32, r, jb, je int, s float32) {
	for j := jb; j < je; j++ {
		rj := rt[j*r : (j+1)*r : (j+1)*r]
		var d float32
		for k := range l {
			d += l[k] * rj[k]
		}
		c[j] += s * d
	}
}

// parallel runs fn over [0, n) split over the CPUs, pieces of at least
// 16 rows.
func parallel(n int, fn func(lo, hi int)) { par.Range(n, 16, fn) }
