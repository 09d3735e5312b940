package quant

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
)

// Block FP8 as DeepSeek-V3 and Qwen3-FP8 ship it, and as transformers'
// FineGrainedFP8Config describes it: quantization_config
// {quant_method: "fp8", fmt: "e4m3", activation_scheme, weight_block_size:
// [bh, bw]}; each quantized `X.weight` is float8 [rows, cols] beside
// `X.weight_scale_inv` float32 [ceil(rows/bh), ceil(cols/bw)], and
//
//	W[r, c] = float32(weight[r, c]) * weight_scale_inv[r/bh, c/bw]
//
// in float32, the last blocks ragged. This is weight_dequant of
// deepseek-ai/DeepSeek-V3 inference/kernel.py (x.to(float32) * s per
// block, stored in torch's default dtype, bfloat16 in fp8_cast_bf16.py)
// and the dequantization of transformers' integrations/finegrained_fp8.py
// (which, unlike DeepSeek's kernel, needs whole blocks; ragged edges
// follow DeepSeek, the format's owner).

func init() { Register("fp8", parseFP8) }

// defaultFP8Block is FineGrainedFP8Config's default weight_block_size.
var defaultFP8Block = [2]int64{128, 128}

type fp8Layout struct {
	block [2]int64
	fmt   dtype.DType // Invalid: either float8 the file holds
	dt    dtype.DType
}

func parseFP8(cfg Config) (Layout, error) {
	var q struct {
		Fmt             string   `json:"fmt"`
		WeightBlockSize *[]int64 `json:"weight_block_size"`
	}
	if err := json.Unmarshal(cfg.Raw, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	l := &fp8Layout{block: defaultFP8Block, dt: cfg.DType}
	if q.WeightBlockSize != nil {
		b := *q.WeightBlockSize
		if len(b) != 2 {
			return nil, fmt.Errorf("%w: weight_block_size %v: two sizes expected", ErrUnknownLayout, b)
		}
		l.block = [2]int64{b[0], b[1]}
	}
	if l.block[0] <= 0 || l.block[1] <= 0 || l.block[0] > maxBlock || l.block[1] > maxBlock {
		return nil, fmt.Errorf("%w: weight_block_size [%d, %d] (sizes from 1 to %d)", ErrUnknownLayout, l.block[0], l.block[1], maxBlock)
	}
	switch strings.ToLower(q.Fmt) {
	case "":
	case "e4m3", "float8_e4m3fn":
		l.fmt = dtype.Float8E4M3FN
	case "e5m2", "float8_e5m2":
		l.fmt = dtype.Float8E5M2
	default:
		return nil, fmt.Errorf("%w: fmt %q (e4m3 and e5m2 are read)", ErrUnknownLayout, q.Fmt)
	}
	return l, nil
}

func (l *fp8Layout) Plan(tensors []Stored) ([]*Group, error) {
	byName := indexStored(tensors)
	var groups []*Group
	for _, t := range tensors {
		if !isFloat8(t.DType) {
			continue
		}
		sc, ok := byName[t.Name+"_scale_inv"]
		if !ok {
			return nil, &Error{Scheme: "fp8", Tensor: t.Name, Err: fmt.Errorf("%w: a %s weight without %s_scale_inv", ErrMissingCompanion, t.DType, lastPart(t.Name))}
		}
		if l.fmt != dtype.Invalid && t.DType != l.fmt {
			return nil, &Error{Scheme: "fp8", Tensor: t.Name, Err: fmt.Errorf("%w: stored as %s, the config says %s", ErrUnknownLayout, t.DType, l.fmt)}
		}
		c, err := newStackedGrid(t, sc, l.block[0], l.block[1], dtype.Float32)
		if err != nil {
			return nil, &Error{Scheme: "fp8", Tensor: t.Name, Err: err}
		}
		g := &Group{Name: t.Name, DType: l.dt, Shape: t.Shape, Weight: t, Companions: []Stored{sc}, Codec: c,
			Scheme: fmt.Sprintf("fp8 %s, %dx%d blocks, scales in %s", f8Name(t.DType), l.block[0], l.block[1], lastPart(sc.Name))}
		g.Consumed = activationScales(byName, t.Name)
		groups = append(groups, g)
	}
	return groups, nil
}

// activationScales names the static activation scales saved beside a
// quantized weight ("X.input_scale", "X.output_scale"), which the
// unquantized model does not have.
func activationScales(byName map[string]Stored, weight string) []string {
	prefix, ok := strings.CutSuffix(weight, "weight")
	if !ok {
		return nil
	}
	var out []string
	for _, n := range []string{"input_scale", "output_scale"} {
		if _, ok := byName[prefix+n]; ok {
			out = append(out, prefix+n)
		}
	}
	return out
}

func indexStored(tensors []Stored) map[string]Stored {
	m := make(map[string]Stored, len(tensors))
	for _, t := range tensors {
		m[t.Name] = t
	}
	return m
}

func isFloat8(d dtype.DType) bool {
	switch d {
	case dtype.Float8E4M3FN, dtype.Float8E5M2, dtype.Float8E4M3FNUZ, dtype.Float8E5M2FNUZ:
		return true
	}
	return false
}

// f8Name is the format's short name: e4m3, e5m2.
func f8Name(d dtype.DType) string {
	switch d {
	case dtype.Float8E4M3FN:
		return "e4m3"
	case dtype.Float8E5M2:
		return "e5m2"
	}
	return d.String()
}

// lastPart is the name after its last dot.
func lastPart(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}
