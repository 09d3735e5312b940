package quant

import (
	"encoding/binary"

	"github.com/ckpt-dev/ckpt/dtype"
)

// GPTQ as AutoGPTQ / GPTQModel save it: `qweight` I32 [in*bits/32, out]
// packed down the input dimension (each column a dense little-endian bit
// stream: element i at bit i*bits, 3-bit fields straddling words),
// `qzeros` I32 [groups, out*bits/32] packed along the output dimension,
// `scales` F16 [groups, out], `g_idx` I32 [in] (the group of each input
// row; act-order permutes it). checkpoint_format "gptq" (v1, and absent)
// stores zero-1: z = stored + 1 (no wrap: a stored 15 at 4 bits is 16);
// "gptq_v2" stores z. w[o, i] = scales[g, o] * (q[i, o] - z[g, o]) with
// g = g_idx[i], the logical (nn.Linear) weight being [out, in].
//
// Upstream: AutoGPTQ auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py
// (pack and the torch dequantization in forward: zeros + 1, scales[g_idx]
// * (weight - zeros[g_idx]) in float16), GPTQModel
// gptqmodel/nn_modules/qlinear/__init__.py dequantize_weight (v2).
// (GPTQModel converts v1 to v2 by adding 0x11111111 to the packed words,
// which carries across nibbles for a stored 15; AutoGPTQ's unpacked + 1
// is followed here.) The float32 result is exact (scale * small integer),
// so rounding it to float16 gives upstream's value.

// GPTQLayout is a checked GPTQ weight; the logical weight is [Out, In].
type GPTQLayout struct {
	In, Out, Bits, Groups int
	V2                    bool        // checkpoint_format gptq_v2: zeros as stored
	ScaleDType            dtype.DType // of scales
}

// CheckGPTQ validates qweight, qzeros, scales and g_idx (gIdx nil: none
// stored, then groupSize, -1 for one group, gives each row's group; the
// caller passes it to DequantRows as nil too).
func CheckGPTQ(qweight, qzeros, scales CodecTensor, gIdx *CodecTensor, bits, groupSize int, v2 bool) (GPTQLayout, error) {
	const scheme = "gptq"
	qd, err := codecShape(scheme, qweight, 2, dtype.Int32)
	if err != nil {
		return GPTQLayout{}, err
	}
	if bits != 2 && bits != 3 && bits != 4 && bits != 8 {
		return GPTQLayout{}, codecErr(scheme, qweight, "bits %d, want 2, 3, 4 or 8", bits)
	}
	l := GPTQLayout{In: qd[0] * 32 / bits, Out: qd[1], Bits: bits, V2: v2}
	if qd[0]*32%bits != 0 {
		return GPTQLayout{}, codecErr(scheme, qweight, "shape %v: %d words per column is not a whole number of %d-bit rows", qweight.Shape, qd[0], bits)
	}
	sd, err := codecShape(scheme, scales, 2, codecScaleDTypes...)
	if err != nil {
		return GPTQLayout{}, err
	}
	l.Groups, l.ScaleDType = sd[0], scales.DType
	if sd[1] != l.Out || l.Groups < 1 {
		return GPTQLayout{}, codecErr(scheme, scales, "shape %v, want [groups %d]", scales.Shape, l.Out)
	}
	zd, err := codecShape(scheme, qzeros, 2, dtype.Int32)
	if err != nil {
		return GPTQLayout{}, err
	}
	if zd[0] != l.Groups || zd[1] != codecCeilDiv(l.Out*bits, 32) {
		return GPTQLayout{}, codecErr(scheme, qzeros, "shape %v, want [%d %d]", qzeros.Shape, l.Groups, codecCeilDiv(l.Out*bits, 32))
	}
	if gIdx != nil {
		gd, err := codecShape(scheme, *gIdx, 1, dtype.Int32, dtype.Int64)
		if err != nil {
			return GPTQLayout{}, err
		}
		if gd[0] != l.In {
			return GPTQLayout{}, codecErr(scheme, *gIdx, "shape %v, want [%d]", gIdx.Shape, l.In)
		}
		return l, nil
	}
	if groupSize == -1 {
		groupSize = l.In
	}
	if groupSize <= 0 || codecCeilDiv(l.In, groupSize) != l.Groups {
		return GPTQLayout{}, codecErr(scheme, scales, "%d groups, group_size %d for %d input rows", l.Groups, groupSize, l.In)
	}
	return l, nil
}

// Shape is the logical weight's shape [Out, In].
func (l GPTQLayout) Shape() []int64 { return []int64{int64(l.Out), int64(l.In)} }

// DequantRows decodes rows [r0, r1) of the logical [Out, In] weight (an
// output channel per row) into dst. gIdx is the `g_idx` data (int32 or
// int64 as checked; nil without one, groups then In/Groups rows each);
// a g_idx entry outside [0, Groups) is an ErrCodecBuffer.
func (l GPTQLayout) DequantRows(dst []float32, qweight, qzeros, scales, gIdx []byte, r0, r1 int) error {
	zw := codecCeilDiv(l.Out*l.Bits, 32)
	bufs := []codecBuf{
		{"qweight", qweight, l.In * l.Bits / 32 * l.Out * 4},
		{"qzeros", qzeros, l.Groups * zw * 4},
		{"scales", scales, l.Groups * l.Out * l.ScaleDType.Size()},
	}
	if gIdx != nil && len(gIdx) != 8*l.In {
		bufs = append(bufs, codecBuf{"g_idx", gIdx, 4 * l.In})
	}
	if err := codecRows(dst, r0, r1, l.Out, l.In, bufs...); err != nil {
		return err
	}
	groupOf := func(i int) (int, error) {
		switch {
		case gIdx == nil:
			return i / codecCeilDiv(l.In, l.Groups), nil
		case len(gIdx) == 4*l.In:
			g := int(int32(binary.LittleEndian.Uint32(gIdx[4*i:])))
			if g < 0 || g >= l.Groups {
				return 0, ErrCodecBuffer
			}
			return g, nil
		default:
			g := int64(binary.LittleEndian.Uint64(gIdx[8*i:]))
			if g < 0 || g >= int64(l.Groups) {
				return 0, ErrCodecBuffer
			}
			return int(g), nil
		}
	}
	ss := l.ScaleDType.Size()
	for o := r0; o < r1; o++ {
		out := dst[(o-r0)*l.In : (o-r0+1)*l.In]
		for i := range out {
			g, err := groupOf(i)
			if err != nil {
				return err
			}
			z := int32(codecField(qzeros, g*zw*4, 4, o*l.Bits, l.Bits))
			if !l.V2 {
				z++
			}
			q := int32(codecField(qweight, o*4, 4*l.Out, i*l.Bits, l.Bits))
			out[i] = dtype.ToFloat32(l.ScaleDType, scales[(g*l.Out+o)*ss:]) * float32(q-z)
		}
	}
	return nil
}
