package quant

import (
	"github.com/ckpt-dev/ckpt/dtype"
)

// AWQ GEMM as AutoAWQ saves it: `qweight` I32 [in, out/8], eight 4-bit
// codes per word in AWQ's interleaved order (nibble k of word w holds
// output column 8w + [0, 2, 4, 6, 1, 3, 5, 7][k]), `qzeros` I32
// [in/group, out/8] packed the same way, `scales` F16 [in/group, out].
// w[o, i] = (q[i, o] - z[i/group, o]) * scales[i/group, o]; the logical
// (nn.Linear) weight is [out, in], the transpose of AutoAWQ's [in, out].
//
// Upstream: AutoAWQ awq/utils/packing_utils.py (unpack_awq,
// reverse_awq_order with AWQ_REVERSE_ORDER [0, 4, 1, 5, 2, 6, 3, 7],
// dequantize_gemm) and awq/modules/linear/gemm.py (packing),
// https://github.com/casper-hansen/AutoAWQ. Only 4 bits (the GEMM kernel's
// width). The float32 result is exact, so rounding it to float16 gives
// upstream's value.

// awqColumnNibble maps a column's position within its word to the nibble
// that holds it (the inverse of AWQ's pack order).
var awqColumnNibble = [8]uint{0, 4, 1, 5, 2, 6, 3, 7}

// AWQLayout is a checked AWQ GEMM weight; the logical weight is [Out, In].
type AWQLayout struct {
	In, Out, GroupSize int
	ScaleDType         dtype.DType
}

// CheckAWQ validates qweight, qzeros and scales for the given group size
// (-1 or 0 for one group over all input rows is refused: AutoAWQ always
// groups).
func CheckAWQ(qweight, qzeros, scales CodecTensor, groupSize int) (AWQLayout, error) {
	const scheme = "awq"
	qd, err := codecShape(scheme, qweight, 2, dtype.Int32)
	if err != nil {
		return AWQLayout{}, err
	}
	l := AWQLayout{In: qd[0], Out: qd[1] * 8, GroupSize: groupSize}
	if groupSize <= 0 || l.In%groupSize != 0 {
		return AWQLayout{}, codecErr(scheme, qweight, "group_size %d does not divide %d input rows", groupSize, l.In)
	}
	groups := l.In / groupSize
	zd, err := codecShape(scheme, qzeros, 2, dtype.Int32)
	if err != nil {
		return AWQLayout{}, err
	}
	if zd[0] != groups || zd[1] != qd[1] {
		return AWQLayout{}, codecErr(scheme, qzeros, "shape %v, want [%d %d]", qzeros.Shape, groups, qd[1])
	}
	sd, err := codecShape(scheme, scales, 2, codecScaleDTypes...)
	if err != nil {
		return AWQLayout{}, err
	}
	if sd[0] != groups || sd[1] != l.Out {
		return AWQLayout{}, codecErr(scheme, scales, "shape %v, want [%d %d]", scales.Shape, groups, l.Out)
	}
	l.ScaleDType = scales.DType
	return l, nil
}

// Shape is the logical weight's shape [Out, In].
func (l AWQLayout) Shape() []int64 { return []int64{int64(l.Out), int64(l.In)} }

// DequantRows decodes rows [r0, r1) of the logical [Out, In] weight into
// dst.
func (l AWQLayout) DequantRows(dst []float32, qweight, qzeros, scales []byte, r0, r1 int) error {
	groups := l.In / l.GroupSize
	wpr := l.Out / 8 // words per stored row
	if err := codecRows(dst, r0, r1, l.Out, l.In,
		codecBuf{"qweight", qweight, l.In * wpr * 4},
		codecBuf{"qzeros", qzeros, groups * wpr * 4},
		codecBuf{"scales", scales, groups * l.Out * l.ScaleDType.Size()}); err != nil {
		return err
	}
	ss := l.ScaleDType.Size()
	for o := r0; o < r1; o++ {
		w, nib := o/8, int(awqColumnNibble[o%8])*4
		out := dst[(o-r0)*l.In : (o-r0+1)*l.In]
		for g := 0; g < groups; g++ {
			z := int32(codecField(qzeros, (g*wpr+w)*4, 4, nib, 4))
			s := dtype.ToFloat32(l.ScaleDType, scales[(g*l.Out+o)*ss:])
			for i := g * l.GroupSize; i < (g+1)*l.GroupSize; i++ {
				q := int32(codecField(qweight, (i*wpr+w)*4, 4, nib, 4))
				out[i] = float32(q-z) * s
			}
		}
	}
	return nil
}
