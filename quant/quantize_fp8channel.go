package quant

import "github.com/ckpt-dev/ckpt/dtype"

// FP8 per-channel quantization in compressed-tensors' float-quantized
// layout (what llm-compressor's FP8 / FP8_DYNAMIC schemes save):
// `X.weight` float8_e4m3fn [R, C] and `X.weight_scale` [R, 1] in the
// weight's dtype, read back by compressed.go.
//
// Upstream: compressed-tensors src/compressed_tensors/quantization/utils/
// helpers.py calculate_qparams (symmetric): min/max per output channel in
// the weight's dtype (the min-max observer), clipped to include 0;
// max_val_pos = max(|min|, |max|); scale = max_val_pos / (bit_range/2)
// with bit_range = 448 - (-448), a division in the weight's dtype (a
// Python float divides a bfloat16 tensor in bfloat16), then clamped below
// at float32 eps; quantization/lifecycle/forward.py _quantize: x / scale
// in the weight's dtype, clamp(-448, 448), .to(float8_e4m3fn)
// (round_to_quantized_type_args). A NaN in a row makes that row's scale
// NaN and every code of the row NaN, as upstream.

type fp8ChannelQuantizer struct {
	out        []Stored
	rows, cols int64
	dt         dtype.DType
	scales     []float32 // one per row, already rounded to dt
}

func newFP8ChannelQuantizer(name string, dt dtype.DType, shape []int64) (WeightQuantizer, Skip) {
	m := ModuleOf(name)
	q := &fp8ChannelQuantizer{rows: shape[0], cols: shape[1], dt: dt}
	q.out = []Stored{
		{Name: name, DType: dtype.Float8E4M3FN, Shape: []int64{q.rows, q.cols}},
		{Name: m + ".weight_scale", DType: dt, Shape: []int64{q.rows, 1}},
	}
	return q, ""
}

func (q *fp8ChannelQuantizer) Outputs() []Stored { return q.out }
func (q *fp8ChannelQuantizer) Rows() int64       { return q.rows }
func (q *fp8ChannelQuantizer) Cols() int64       { return q.cols }
func (q *fp8ChannelQuantizer) RowAlign() int64   { return 1 }

// channelScale is calculate_qparams' symmetric scale of one row.
func channelScale(dt dtype.DType, row []float32, qmax float32) float32 {
	m := absMax(row)
	s := roundTo(dt, m/qmax)
	if s < epsF32 {
		s = epsF32 // torch.clamp(min=eps), eps exact in every dtype; NaN stays NaN
	}
	return s
}

// epsF32 is torch.finfo(torch.float32).eps.
const epsF32 = 1.1920928955078125e-07

func (q *fp8ChannelQuantizer) Prepare(read RowReader) error {
	q.scales = make([]float32, q.rows)
	return forRowChunks(q, read, func(src []float32, r0, r1 int64) {
		for r := r0; r < r1; r++ {
			q.scales[r] = channelScale(q.dt, src[(r-r0)*q.cols:][:q.cols], fp8Max)
		}
	})
}

func (q *fp8ChannelQuantizer) Companion(i int) []byte {
	b := make([]byte, int64(q.dt.Size())*q.rows)
	dtype.EncodeFloat32(q.dt, b, q.scales)
	return b
}

func (q *fp8ChannelQuantizer) CodeSpan(r0, r1 int64) (int64, int64) { return r0 * q.cols, r1 * q.cols }

func (q *fp8ChannelQuantizer) Codes(dst []byte, src []float32, r0, r1 int64) {
	for r := r0; r < r1; r++ {
		s := q.scales[r]
		srow := src[(r-r0)*q.cols:][:q.cols]
		drow := dst[(r-r0)*q.cols:][:q.cols]
		for c, x := range srow {
			drow[c] = e4m3FromF32(clamp(roundTo(q.dt, x/s), -fp8Max, fp8Max))
		}
	}
}
