package quant

import (
	"fmt"
	"strings"
)

// fp8-block for fused MoE experts: transformers' FP8Experts stores
// `M.experts.gate_up_proj` [E, 2I, H] (and `up_proj`, `down_proj`
// [E, H, I]) float8 beside `<name>_scale_inv` [E, 2I/bh, H/bw]
// (src/transformers/integrations/finegrained_fp8.py: replace_with_fp8_linear
// swaps a module whose name ends in ".experts" for FP8Experts;
// Fp8Quantize._quantize_one quantizes any tensor of two or more
// dimensions whose last two are whole blocks, keeping the leading ones,
// and names the scale key + "_scale_inv" for a key not ending in
// "weight"). Each expert's [out, in] slice is its own grid of blocks;
// since the slices are whole blocks, the 2-D quantizer over the weight
// folded to [E*out, in] computes exactly those blocks, and only the
// stored shapes differ.

// fusedExperts reports whether name is a fused expert projection of a
// transformers MoE ("....experts.gate_up_proj", up_proj or down_proj) of
// three dimensions.
func fusedExperts(name string, shape []int64) bool {
	if len(shape) != 3 {
		return false
	}
	i := strings.LastIndex(name, ".experts.")
	if i < 0 {
		return false
	}
	param := name[i+len(".experts."):]
	if strings.Contains(param, ".") {
		return false
	}
	switch param {
	case "gate_up_proj", "up_proj", "down_proj":
		return true
	}
	return false
}

// stackedQuantizer is a 2-D quantizer over a weight whose leading
// dimensions are folded into its rows, writing the stored tensors with
// the leading dimensions kept.
type stackedQuantizer struct {
	WeightQuantizer
	out []Stored
}

func (q *stackedQuantizer) Outputs() []Stored { return q.out }

// newStackedFP8Block quantizes a [E, out, in] weight expert by expert in
// blocks; a slice that is not whole blocks leaves the weight unquantized,
// as upstream.
func newStackedFP8Block(name string, shape []int64, block [2]int64) (WeightQuantizer, Skip) {
	e, r, c := shape[0], shape[1], shape[2]
	if e <= 0 || r <= 0 || c <= 0 || numel(shape) < 0 {
		return nil, Skip(fmt.Sprintf("shape %s: empty", shapeText(shape)))
	}
	if r%block[0] != 0 || c%block[1] != 0 {
		return nil, Skip(fmt.Sprintf("shape %s: each expert's [%d, %d] is not a whole number of %dx%d blocks (upstream leaves it unquantized)", shapeText(shape), r, c, block[0], block[1]))
	}
	inner, why := newFP8BlockQuantizer(name, []int64{e * r, c}, block)
	if why != "" {
		return nil, why
	}
	out := append([]Stored(nil), inner.Outputs()...)
	out[0].Shape = []int64{e, r, c}
	out[1].Shape = []int64{e, r / block[0], c / block[1]}
	return &stackedQuantizer{WeightQuantizer: inner, out: out}, ""
}
