package lora

import (
	"math"

	"github.com/ckpt-dev/ckpt/internal/par"
)

// tileCols is the width of the delta tile the portable kernel sums in
// (1 KiB of float32, on the stack).
const tileCols = 256

// blockBytes bounds the bytes of rm's column block (r rows of it) that the
// kernel keeps in the first-level cache while the rows of c go by.
const blockBytes = 16 << 10

// AddMatMul adds s * l @ rm to c: c is (m, n), l is (m, r), rm is (r, n),
// all row-major float32. Each element is
//
//	c[i,j] += s * d, d = sum over k = 0..r-1, in order, of l[i,k]*rm[k,j]
//
// d summed with fused multiply-adds (d = fma32(l[i,k], rm[k,j], d), one
// rounding to float32 per term), then s * d and the add each rounded to
// float32, whatever the CPU: the vector kernel (AVX2 and FMA on amd64)
// and the portable one give the same bits. The delta is summed a tile of
// one row at a time (never materialised whole), as r saxpys over a row
// of rm that stays in cache; rows are split over all CPUs.
func AddMatMul(c, l, rm []float32, m, n, r int, s float32) {
	if m == 0 || n == 0 || r == 0 {
		return
	}
	_ = c[m*n-1]
	_ = l[m*r-1]
	_ = rm[r*n-1]
	block := max(blockBytes/4/r/vecCols*vecCols, vecCols)
	nv := 0
	if haveVec {
		nv = n / vecCols * vecCols
	}
	parallel(m, func(lo, hi int) {
		for jb := 0; jb < nv; jb += block {
			w := min(block, nv-jb)
			for i := lo; i < hi; i++ {
				addRowVec(&c[i*n+jb], &l[i*r], &rm[jb], n, r, w, s)
			}
		}
		if nv == n {
			return
		}
		for i := lo; i < hi; i++ {
			addRowGo(c[i*n+nv:(i+1)*n], l[i*r:(i+1)*r], rm, n, nv, n, s)
		}
	})
}

// AddMatMulT adds s * l @ rt.T to c: c is (m, n), l is (m, r), rt is
// (n, r), row-major float32; it is AddMatMul with rm = rt.T (copied).
func AddMatMulT(c, l, rt []float32, m, n, r int, s float32) {
	if m == 0 || n == 0 || r == 0 {
		return
	}
	AddMatMul(c, l, transpose(rt[:n*r], n, r), m, n, r, s)
}

// addRowGo does columns jb to je of one row of c (c[0] is column jb; l
// its row of l) in the order and roundings AddMatMul states, a tile at a
// time (addTileGo).
func addRowGo(c, l, rm []float32, n, jb, je int, s float32) {
	for j0 := jb; j0 < je; j0 += tileCols {
		w := min(tileCols, je-j0)
		addTileGo(c[j0-jb:j0-jb+w], l, rm, n, j0, s)
	}
}

// addTileGo does the len(c) <= tileCols columns from j0 of one row: a tile
// of d summed over k, then added to c. The float32 conversions keep the
// compiler from fusing the last multiply and add.
func addTileGo(c, l, rm []float32, n, j0 int, s float32) {
	var tile [tileCols]float32
	d := tile[:len(c):len(c)]
	for k, x := range l {
		row := rm[k*n+j0 : k*n+j0+len(d)]
		row = row[:len(d)]
		for j, v := range row {
			d[j] = fma32(x, v, d[j])
		}
	}
	c = c[:len(d)]
	for j, v := range d {
		c[j] += float32(s * v)
	}
}

// parallel runs fn over [0, n) split over the CPUs, pieces of at least
// 16 rows.
func parallel(n int, fn func(lo, hi int)) { par.Range(n, 16, fn) }

// fma32 returns x*y + z rounded once to float32 (IEEE fusedMultiplyAdd, as
// the VFMADD instructions give it). x*y is exact in float64; the float64
// sum is rounded to odd (its rounding error, from TwoSum, moves an even
// result to its odd neighbour towards the exact value), which float32
// then rounds correctly: 53 bits are more than float32's 24 plus two.
func fma32(x, y, z float32) float32 {
	p := float64(float64(x) * float64(y)) // exact; the conversion stops fusion
	zz := float64(z)
	s := p + zz
	b := s - p
	e := (p - (s - b)) + (zz - b) // p + zz = s + e exactly, s finite
	if e != 0 && math.Abs(s) <= math.MaxFloat64 {
		if u := math.Float64bits(s); u&1 == 0 {
			if (e > 0) == (s > 0) {
				u++ // the exact value is further from zero
			} else {
				u--
			}
			s = math.Float64frombits(u)
		}
	}
	return float32(s)
}
