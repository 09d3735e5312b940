package quant

import (
	"encoding/binary"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// NVFP4 as compressed-tensors writes it (format `nvfp4-pack-quantized`):
// `weight_packed` U8 [out, in/2], two FP4 E2M1 codes per byte with the
// even element in the low nibble; `weight_scale` F8_E4M3 [out, in/16],
// one scale per 16-element group; `weight_global_scale` F32 [1].
//
// Upstream: compressed-tensors src/compressed_tensors/compressors/nvfp4/
// base.py decompress -> helpers.py unpack_fp4_from_uint8, then
// quantization/lifecycle/forward.py dequantize -> forward_helpers.py
// _dequantize (https://github.com/vllm-project/compressed-tensors): the
// FP8 scale is cast to the unpacked dtype (bfloat16, exact), then
// `scale = scale / global_scale` — a bfloat16 [out, G] tensor divided by
// the float32 [1] tensor, which type promotion makes a float32 division
// — and the value is fp4 * scale in float32, cast to bfloat16 at the
// end. DequantRows gives that float32 product: the global scale divides
// the group scale first, it does not divide the product. (NVIDIA
// ModelOpt's own NVFP4 layout multiplies a `weight_scale_2` instead; that
// is not this layout.)

// NVFP4Layout is a checked compressed-tensors NVFP4 weight [Rows, Cols].
type NVFP4Layout struct {
	Rows, Cols int
}

// nvfp4Group is the number of elements one FP8 scale covers.
const nvfp4Group = 16

// CheckNVFP4 validates `weight_packed`, `weight_scale` and
// `weight_global_scale` and returns the layout of the logical weight.
func CheckNVFP4(packed, scale, global CodecTensor) (NVFP4Layout, error) {
	const scheme = "nvfp4"
	pd, err := codecShape(scheme, packed, 2, dtype.Uint8)
	if err != nil {
		return NVFP4Layout{}, err
	}
	l := NVFP4Layout{Rows: pd[0], Cols: 2 * pd[1]}
	if l.Cols%nvfp4Group != 0 {
		return NVFP4Layout{}, codecErr(scheme, packed, "shape %v: %d columns are not a whole number of %d-element groups", packed.Shape, l.Cols, nvfp4Group)
	}
	sd, err := codecShape(scheme, scale, 2, dtype.Float8E4M3FN)
	if err != nil {
		return NVFP4Layout{}, err
	}
	if sd[0] != l.Rows || sd[1] != l.Cols/nvfp4Group {
		return NVFP4Layout{}, codecErr(scheme, scale, "shape %v, want [%d %d] for weight_packed %v", scale.Shape, l.Rows, l.Cols/nvfp4Group, packed.Shape)
	}
	gd, err := codecShape(scheme, global, -1, dtype.Float32)
	if err != nil {
		return NVFP4Layout{}, err
	}
	if len(gd) > 1 || len(gd) == 1 && gd[0] != 1 {
		return NVFP4Layout{}, codecErr(scheme, global, "shape %v, want [1]", global.Shape)
	}
	return l, nil
}

// Shape is the logical weight's shape [Rows, Cols].
func (l NVFP4Layout) Shape() []int64 { return []int64{int64(l.Rows), int64(l.Cols)} }

// DequantRows decodes rows [r0, r1) into dst ((r1-r0)*Cols float32s)
// from the whole `weight_packed`, `weight_scale` and the 4 bytes of
// `weight_global_scale`: fp4 * (float32(scale) / global). A zero, NaN or
// infinite global scale gives what the division gives (Inf or NaN), as
// upstream.
func (l NVFP4Layout) DequantRows(dst []float32, packed, scale, global []byte, r0, r1 int) error {
	g := l.Cols / nvfp4Group
	if err := codecRows(dst, r0, r1, l.Rows, l.Cols,
		codecBuf{"weight_packed", packed, l.Rows * l.Cols / 2},
		codecBuf{"weight_scale", scale, l.Rows * g},
		codecBuf{"weight_global_scale", global, 4}); err != nil {
		return err
	}
	gs := math.Float32frombits(binary.LittleEndian.Uint32(global))
	for r := r0; r < r1; r++ {
		for j := 0; j < g; j++ {
			s := e4m3Table[scale[r*g+j]] / gs
			out := dst[(r-r0)*l.Cols+j*nvfp4Group:][:nvfp4Group]
			in := packed[(r*l.Cols+j*nvfp4Group)/2:][:nvfp4Group/2]
			for k, b := range in {
				out[2*k] = fp4E2M1[b&0x0f] * s
				out[2*k+1] = fp4E2M1[b>>4] * s
			}
		}
	}
	return nil
}

// e4m3Table maps every float8_e4m3fn byte to its float32 value.
var e4m3Table = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(dtype.Float8ToFloat64(dtype.Float8E4M3FN, byte(i)))
	}
	return t
}()
