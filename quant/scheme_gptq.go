package quant

import (
	"encoding/json"
	"fmt"
	"strings"
)

// GPTQ and AWQ GEMM (gptq.go and awq.go have the codecs): each quantized
// linear M stores M.qweight, M.qzeros, M.scales (and, GPTQ, M.g_idx) and
// reads as M.weight [out, in]; M.bias stays as it is. The value is
// computed in the scales' dtype (float16) as the upstream torch
// dequantizations do.
//
// GPTQ: quantization_config {quant_method: "gptq", bits, group_size
// (-1: one group), desc_act, sym, checkpoint_format: "gptq" (zeros stored
// minus one, the default) or "gptq_v2"}. g_idx, when stored, gives each
// input row's group (act-order); without it rows go to groups in order.
//
// AWQ: quantization_config {quant_method: "awq", bits (or w_bit),
// group_size (or q_group_size), zero_point, version: "gemm"}; GEMV,
// Marlin, IPEX and exllama versions pack differently and are refused.

func init() {
	Register("gptq", parseGPTQ)
	Register("awq", parseAWQ)
}

type gptqLayout struct {
	awq       bool
	bits      int
	groupSize int
	v2        bool
	cfg       Config
}

func parseGPTQ(cfg Config) (Layout, error) {
	var q struct {
		Bits             int    `json:"bits"`
		GroupSize        *int   `json:"group_size"`
		CheckpointFormat string `json:"checkpoint_format"`
	}
	if err := json.Unmarshal(cfg.Raw, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	l := &gptqLayout{bits: q.Bits, groupSize: 128, cfg: cfg}
	if q.GroupSize != nil {
		l.groupSize = *q.GroupSize
	}
	switch strings.ToLower(q.CheckpointFormat) {
	case "", "gptq":
	case "gptq_v2":
		l.v2 = true
	default:
		return nil, fmt.Errorf("%w: checkpoint_format %q (gptq and gptq_v2 are read)", ErrUnknownLayout, q.CheckpointFormat)
	}
	return l, nil
}

func parseAWQ(cfg Config) (Layout, error) {
	var q struct {
		Bits       int    `json:"bits"`
		WBit       int    `json:"w_bit"`
		GroupSize  int    `json:"group_size"`
		QGroupSize int    `json:"q_group_size"`
		Version    string `json:"version"`
		ZeroPoint  *bool  `json:"zero_point"`
	}
	if err := json.Unmarshal(cfg.Raw, &q); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if v := strings.ToLower(q.Version); v != "" && v != "gemm" {
		return nil, fmt.Errorf("%w: AWQ version %q (only gemm is read)", ErrUnknownLayout, q.Version)
	}
	bits, gs := max(q.Bits, q.WBit), max(q.GroupSize, q.QGroupSize)
	if bits != 0 && bits != 4 {
		return nil, fmt.Errorf("%w: AWQ with %d bits (4-bit GEMM is read)", ErrUnknownLayout, bits)
	}
	if q.ZeroPoint != nil && !*q.ZeroPoint {
		return nil, fmt.Errorf("%w: AWQ without zero points (GEMM stores them)", ErrUnknownLayout)
	}
	if gs == 0 {
		gs = 128
	}
	return &gptqLayout{awq: true, bits: 4, groupSize: gs, cfg: cfg}, nil
}

func (l *gptqLayout) scheme() string {
	if l.awq {
		return "awq"
	}
	return "gptq"
}

func (l *gptqLayout) Plan(tensors []Stored) ([]*Group, error) {
	byName := indexStored(tensors)
	var groups []*Group
	for _, t := range tensors {
		prefix, ok := strings.CutSuffix(t.Name, "qweight")
		if !ok || prefix != "" && !strings.HasSuffix(prefix, ".") {
			continue
		}
		var comps []Stored
		for _, s := range []string{"qzeros", "scales"} {
			c, ok := byName[prefix+s]
			if !ok {
				return nil, &Error{Scheme: l.scheme(), Tensor: t.Name, Err: fmt.Errorf("%w: qweight without %s%s", ErrMissingCompanion, prefix, s)}
			}
			comps = append(comps, c)
		}
		g, err := l.group(prefix, t, comps, byName)
		if err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, nil
}

func (l *gptqLayout) group(prefix string, qw Stored, comps []Stored, byName map[string]Stored) (*Group, error) {
	qz, sc := codecTensor(comps[0]), codecTensor(comps[1])
	var c *rowsCodec
	var desc string
	if l.awq {
		lay, err := CheckAWQ(codecTensor(qw), qz, sc, l.groupSize)
		if err != nil {
			return nil, codecError("awq", qw.Name, err)
		}
		c = &rowsCodec{rows: int64(lay.Out), cols: int64(lay.In), codeBytes: int64(lay.In) * int64(lay.Out) / 2,
			dec: func(dst []float32, codes []byte, cs [][]byte, r0, r1 int) error {
				return roundRowsTo(lay.ScaleDType, dst, lay.DequantRows(dst, codes, cs[0], cs[1], r0, r1))
			}}
		desc = fmt.Sprintf("awq gemm int4, groups of %d, zeros in qzeros, scales in scales", l.groupSize)
	} else {
		var gi *CodecTensor
		if g, ok := byName[prefix+"g_idx"]; ok {
			ct := codecTensor(g)
			gi = &ct
			comps = append(comps, g)
		}
		lay, err := CheckGPTQ(codecTensor(qw), qz, sc, gi, l.bits, l.groupSize, l.v2)
		if err != nil {
			return nil, codecError("gptq", qw.Name, err)
		}
		c = &rowsCodec{rows: int64(lay.Out), cols: int64(lay.In), codeBytes: int64(lay.In*lay.Bits/32) * int64(lay.Out) * 4,
			dec: func(dst []float32, codes []byte, cs [][]byte, r0, r1 int) error {
				var g []byte
				if len(cs) > 2 {
					g = cs[2]
				}
				return roundRowsTo(lay.ScaleDType, dst, lay.DequantRows(dst, codes, cs[0], cs[1], g, r0, r1))
			}}
		f := "gptq"
		if l.v2 {
			f = "gptq_v2"
		}
		gs := fmt.Sprintf("groups of %d", l.groupSize)
		if l.groupSize == -1 {
			gs = "one group"
		}
		if gi != nil {
			gs += ", g_idx"
		}
		desc = fmt.Sprintf("gptq int%d (%s), %s, zeros in qzeros, scales in scales", l.bits, f, gs)
	}
	return &Group{Name: prefix + "weight", DType: l.cfg.DType, Shape: []int64{c.rows, c.cols}, Weight: qw, Companions: comps, Codec: c, Scheme: desc}, nil
}
