package quant

import (
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// MXFP4 as gpt-oss ships its MoE experts (the OCP microscaling format):
// `<name>_blocks` U8 [..., G, 16] holds 32 FP4 E2M1 codes per group of
// 32 elements, two per byte with the even element in the low nibble, and
// `<name>_scales` U8 [..., G] one E8M0 exponent per group; element value
// = fp4 * 2^(scale-127).
//
// Upstream: transformers src/transformers/integrations/mxfp4.py,
// convert_moe_packed_tensors
// (https://github.com/huggingface/transformers/blob/main/src/transformers/integrations/mxfp4.py):
// scales.to(int32) - 127; blocks reshaped [rows, 16]; out[:, 0::2] =
// lut[blk & 0x0F], out[:, 1::2] = lut[blk >> 4]; torch.ldexp(out, exp)
// (= out * pow(2.0, exp) with the power in float32, so exponent byte
// 255 gives +Inf and a zero code times it NaN, as here); then
// reshape(*prefix, G*32) and transpose(1, 2).contiguous(): gate_up_proj
// [E, 2I, G, 16] becomes the BF16 model's [E, H, 2I] (H = G*32) and
// down_proj [E, H, G, 16] becomes [E, I, H]. The BF16 model's names are
// the stored ones without the `_blocks` suffix.

// fp4E2M1 maps an FP4 E2M1 code (sign in bit 3) to its value: the table
// of transformers' FP4_VALUES and compressed-tensors' kE2M1ToFloat with
// the sign applied.
var fp4E2M1 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, float32(math.Copysign(0, -1)), -0.5, -1, -1.5, -2, -3, -4, -6}

// mxfp4Scales maps an E8M0 byte to 2^(byte-127) in float32 (+Inf for 255).
var mxfp4Scales = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(math.Ldexp(1, i-127))
	}
	return t
}()

// MXFP4Layout is a checked gpt-oss MXFP4 weight: Prefix are the leading
// dimensions of `_blocks` (e.g. [experts, rows]) and Groups the number of
// 32-element groups per row.
type MXFP4Layout struct {
	Prefix []int
	Groups int
}

// CheckMXFP4 validates `_blocks` (U8 [..., G, 16]) against `_scales`
// (U8 [..., G], the same leading dimensions) and returns the layout, or a
// *CodecLayoutError naming the tensor that does not fit.
func CheckMXFP4(blocks, scales CodecTensor) (MXFP4Layout, error) {
	const scheme = "mxfp4"
	bd, err := codecShape(scheme, blocks, -1, dtype.Uint8)
	if err != nil {
		return MXFP4Layout{}, err
	}
	if len(bd) < 2 || bd[len(bd)-1] != 16 {
		return MXFP4Layout{}, codecErr(scheme, blocks, "shape %v, want [..., groups, 16]", blocks.Shape)
	}
	sd, err := codecShape(scheme, scales, len(bd)-1, dtype.Uint8, dtype.Float8E8M0FNU)
	if err != nil {
		return MXFP4Layout{}, err
	}
	for i := range sd {
		if sd[i] != bd[i] {
			return MXFP4Layout{}, codecErr(scheme, scales, "shape %v does not match blocks %v", scales.Shape, blocks.Shape)
		}
	}
	return MXFP4Layout{Prefix: bd[:len(bd)-2], Groups: bd[len(bd)-2]}, nil
}

// Rows is the number of rows of the stored-orientation weight (the
// product of Prefix).
func (l MXFP4Layout) Rows() int {
	n := 1
	for _, d := range l.Prefix {
		n *= d
	}
	return n
}

// Cols is the row length of the stored-orientation weight, Groups*32.
func (l MXFP4Layout) Cols() int { return l.Groups * 32 }

// Shape is the stored-orientation logical shape [Prefix..., Groups*32].
func (l MXFP4Layout) Shape() []int64 {
	s := make([]int64, 0, len(l.Prefix)+1)
	for _, d := range l.Prefix {
		s = append(s, int64(d))
	}
	return append(s, int64(l.Cols()))
}

// TransformersShape is the shape of the BF16 gpt-oss model's tensor,
// [E, Groups*32, R] for Prefix [E, R] (transpose(1, 2)); ok is false for
// any other rank, which transformers does not convert.
func (l MXFP4Layout) TransformersShape() (shape []int64, ok bool) {
	if len(l.Prefix) != 2 {
		return nil, false
	}
	return []int64{int64(l.Prefix[0]), int64(l.Cols()), int64(l.Prefix[1])}, true
}

func (l MXFP4Layout) bufs(blocks, scales []byte) []codecBuf {
	n := l.Rows() * l.Groups
	return []codecBuf{{"blocks", blocks, n * 16}, {"scales", scales, n}}
}

// DequantRows decodes rows [r0, r1) of the stored-orientation weight
// (Shape flattened to [Rows, Cols]) into dst, (r1-r0)*Cols float32s, from
// the whole `_blocks` and `_scales` data.
func (l MXFP4Layout) DequantRows(dst []float32, blocks, scales []byte, r0, r1 int) error {
	if err := codecRows(dst, r0, r1, l.Rows(), l.Cols(), l.bufs(blocks, scales)...); err != nil {
		return err
	}
	g0, g1 := r0*l.Groups, r1*l.Groups
	for g := g0; g < g1; g++ {
		s := mxfp4Scales[scales[g]]
		out := dst[(g-g0)*32 : (g-g0)*32+32]
		blk := blocks[g*16 : g*16+16]
		for j, b := range blk {
			out[2*j] = fp4E2M1[b&0x0f] * s
			out[2*j+1] = fp4E2M1[b>>4] * s
		}
	}
	return nil
}

// DequantTransposedRows decodes rows [r0, r1) of the transformers-layout
// weight (TransformersShape flattened to [E*Groups*32, R]) into dst,
// (r1-r0)*R float32s: row e*Cols+k holds element k of every stored row r
// of expert e.
func (l MXFP4Layout) DequantTransposedRows(dst []float32, blocks, scales []byte, r0, r1 int) error {
	shape, ok := l.TransformersShape()
	if !ok {
		return ErrCodecBuffer
	}
	e, cols, r := int(shape[0]), int(shape[1]), int(shape[2])
	if err := codecRows(dst, r0, r1, e*cols, r, l.bufs(blocks, scales)...); err != nil {
		return err
	}
	// One 32-element group of the stored rows at a time: its 16 bytes
	// give that element of up to 32 consecutive output rows, so each
	// stored cache line is read once, not once per output row.
	for t := r0; t < r1; {
		ex, k := t/cols, t%cols
		g := k / 32
		n := min(r1-t, (g+1)*32-k) // output rows of this group
		for i := 0; i < r; i++ {
			gi := (ex*r+i)*l.Groups + g
			s := mxfp4Scales[scales[gi]]
			blk := blocks[gi*16 : gi*16+16]
			for j := 0; j < n; j++ {
				e := k%32 + j
				out := &dst[(t-r0+j)*r+i]
				if e%2 == 0 {
					*out = fp4E2M1[blk[e/2]&0x0f] * s
				} else {
					*out = fp4E2M1[blk[e/2]>>4] * s
				}
			}
		}
		t += n
	}
	return nil
}
