package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Block FP8 quantization, the layout fp8.go reads: `X.weight`
// float8_e4m3fn [R, C] and `X.weight_scale_inv` float32 [R/bh, C/bw].
//
// Upstream: transformers src/transformers/integrations/finegrained_fp8.py,
// Fp8Quantize._quantize_one (the quantizer FineGrainedFP8Config runs, and
// the reverse op of its dequantization): the weight is cast to float32;
// per block max_abs = amax(|w|); scale = 448 / max_abs, and 1 where
// max_abs is not > 0 (448 / max_abs being Tensor.__rtruediv__, that is
// max_abs.reciprocal() * 448, two float32 roundings; zero blocks, and NaN blocks, since NaN > 0 is
// false); q = clamp(w * scale, -448, 448).to(float8_e4m3fn) (c10's
// round-to-nearest-even cast); weight_scale_inv = (1.0 / scale) in
// float32. Rows or columns that are not whole blocks make upstream leave
// the tensor unquantized; so does ckpt (the tensor is skipped with that
// reason). An infinite element makes max_abs Inf, scale 0, its block's
// codes NaN (Inf*0) and zeros (finite*0), and weight_scale_inv Inf, as
// upstream.

const fp8Max = 448

type fp8BlockQuantizer struct {
	out        []Stored
	rows, cols int64
	bh, bw     int64
	scales     []float32 // the multiplier 448/max_abs, one per block, row-major
}

func newFP8BlockQuantizer(name string, shape []int64, block [2]int64) (WeightQuantizer, Skip) {
	r, c := shape[0], shape[1]
	if r%block[0] != 0 || c%block[1] != 0 {
		return nil, Skip(fmt.Sprintf("shape %s is not a whole number of %dx%d blocks (upstream leaves it unquantized)", shapeText(shape), block[0], block[1]))
	}
	q := &fp8BlockQuantizer{rows: r, cols: c, bh: block[0], bw: block[1]}
	q.out = []Stored{
		{Name: name, DType: dtype.Float8E4M3FN, Shape: []int64{r, c}},
		{Name: name + "_scale_inv", DType: dtype.Float32, Shape: []int64{r / q.bh, c / q.bw}},
	}
	return q, ""
}

func (q *fp8BlockQuantizer) Outputs() []Stored { return q.out }
func (q *fp8BlockQuantizer) Rows() int64       { return q.rows }
func (q *fp8BlockQuantizer) Cols() int64       { return q.cols }
func (q *fp8BlockQuantizer) RowAlign() int64   { return q.bh }

func (q *fp8BlockQuantizer) Prepare(read RowReader) error {
	nb := q.cols / q.bw
	q.scales = make([]float32, (q.rows/q.bh)*nb)
	return forRowChunks(q, read, func(src []float32, r0, r1 int64) {
		for br := r0 / q.bh; br < r1/q.bh; br++ {
			base := (br*q.bh - r0) * q.cols
			for bc := int64(0); bc < nb; bc++ {
				var m float32
				for r := int64(0); r < q.bh && m == m; r++ {
					row := src[base+r*q.cols+bc*q.bw:][:q.bw]
					if a := absMax(row); a > m || a != a {
						m = a
					}
				}
				s := float32(1)
				if m > 0 {
					s = (1 / m) * fp8Max // torch's 448 / t is t.reciprocal() * 448
				}
				q.scales[br*nb+bc] = s
			}
		}
	})
}

func (q *fp8BlockQuantizer) Companion(i int) []byte {
	b := make([]byte, 4*len(q.scales))
	for j, s := range q.scales {
		binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(1.0/s))
	}
	return b
}

func (q *fp8BlockQuantizer) CodeSpan(r0, r1 int64) (int64, int64) { return r0 * q.cols, r1 * q.cols }

func (q *fp8BlockQuantizer) Codes(dst []byte, src []float32, r0, r1 int64) {
	nb := q.cols / q.bw
	for r := r0; r < r1; r++ {
		srow := src[(r-r0)*q.cols:][:q.cols]
		drow := dst[(r-r0)*q.cols:][:q.cols]
		for bc, s := range q.scales[(r/q.bh)*nb:][:nb] {
			sb, db := srow[int64(bc)*q.bw:][:q.bw], drow[int64(bc)*q.bw:][:q.bw]
			for c, x := range sb {
				db[c] = e4m3FromF32(clamp(x*s, -fp8Max, fp8Max))
			}
		}
	}
}
