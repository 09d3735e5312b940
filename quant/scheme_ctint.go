package quant

import (
	"encoding/binary"
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
)

// compressed-tensors' NVFP4 and integer formats (nvfp4.go and packed.go
// have the codecs), planned by compressed.go's config groups, targets and
// ignore list like float-quantized:
//
//   - nvfp4-pack-quantized: M.weight_packed, M.weight_scale (F8_E4M3, one
//     per 16 elements), M.weight_global_scale; M.input_global_scale is an
//     activation scale, consumed.
//   - pack-quantized: M.weight_packed (I32), M.weight_shape (its values
//     are the logical shape), M.weight_scale, M.weight_zero_point when
//     asymmetric.
//   - int-quantized: M.weight (I8), M.weight_scale, M.weight_zero_point.
//
// The integer value is (q - zp) * scale in the scale's dtype, as
// forward_helpers.py _dequantize computes it. M.weight_g_idx (activation
// ordering, I32 or I64 [in]) gives each input column its group, as
// forward.py's _process_quantization reorders them (packed.go).

func init() {
	RegisterCompressed("nvfp4-pack-quantized", nvfp4Quantized)
	RegisterCompressed("pack-quantized", packQuantized)
	RegisterCompressed("int-quantized", packQuantized)
}

// ctTensor is module m's stored tensor suffix, or an ErrMissingCompanion.
func ctTensor(m CompressedModule, suffix string) (Stored, error) {
	t, ok := m.Tensors[m.Prefix+suffix]
	if !ok {
		return t, fmt.Errorf("%w: %sweight_scale without %s%s", ErrMissingCompanion, m.Prefix, m.Prefix, suffix)
	}
	return t, nil
}

func nvfp4Quantized(m CompressedModule) (*Group, error) {
	if m.Args.NumBits != 0 && m.Args.NumBits != 4 || m.Args.Type != "" && m.Args.Type != "float" {
		return nil, fmt.Errorf("%w: nvfp4-pack-quantized with %s weights of %d bits (4-bit float is read)", ErrUnknownLayout, m.Args.Type, m.Args.NumBits)
	}
	var ts [3]Stored
	for i, s := range []string{"weight_packed", "weight_scale", "weight_global_scale"} {
		t, err := ctTensor(m, s)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	lay, err := CheckNVFP4(codecTensor(ts[0]), codecTensor(ts[1]), codecTensor(ts[2]))
	if err != nil {
		return nil, codecError("compressed-tensors nvfp4-pack-quantized", ts[0].Name, err)
	}
	g := int64(lay.Cols / nvfp4Group)
	c := &rowsCodec{rows: int64(lay.Rows), cols: int64(lay.Cols), codeBytes: int64(lay.Rows * lay.Cols / 2),
		rowSpan: rowBytes(int64(lay.Cols / 2)),
		dec: func(dst []float32, codes []byte, comps [][]byte, r0, r1 int) error {
			if len(comps) < 2 || int64(len(comps[0])) != int64(lay.Rows)*g {
				return fmt.Errorf("%w: weight_scale", ErrCodecBuffer)
			}
			sub := NVFP4Layout{Rows: r1 - r0, Cols: lay.Cols}
			return sub.DequantRows(dst, codes, comps[0][int64(r0)*g:int64(r1)*g], comps[1], 0, r1-r0)
		}}
	grp := &Group{Name: m.Prefix + "weight", DType: m.DType, Shape: lay.Shape(), Weight: ts[0], Companions: ts[1:], Codec: c,
		Scheme: "compressed-tensors nvfp4-pack-quantized, e2m1 in groups of 16, e4m3 scales in weight_scale, global scale in weight_global_scale"}
	if _, ok := m.Tensors[m.Prefix+"input_global_scale"]; ok {
		grp.Consumed = append(grp.Consumed, m.Prefix+"input_global_scale")
	}
	return grp, nil
}

// packQuantized reads pack-quantized (weight_packed) and int-quantized (weight) modules.
func packQuantized(m CompressedModule) (*Group, error) {
	a := m.Args
	if a.Type != "" && a.Type != "int" {
		return nil, fmt.Errorf("%w: %s with %s weights (integer weights are read)", ErrUnknownLayout, m.Format, a.Type)
	}
	scheme := "compressed-tensors " + m.Format
	wname, consumed := "weight", []string(nil)
	if m.Format == "pack-quantized" {
		wname = "weight_packed"
	}
	w, err := ctTensor(m, wname)
	if err != nil {
		return nil, err
	}
	scale := m.Tensors[m.Prefix+"weight_scale"]
	var shape []int64
	if m.Format == "pack-quantized" {
		st, err := ctTensor(m, "weight_shape")
		if err != nil {
			return nil, err
		}
		if shape, err = readShape(st); err != nil {
			return nil, err
		}
		consumed = append(consumed, st.Name)
	}
	comps := []Stored{scale}
	var zp *CodecTensor
	if z, ok := m.Tensors[m.Prefix+"weight_zero_point"]; ok {
		ct := codecTensor(z)
		zp = &ct
		comps = append(comps, z)
	}
	bits := a.NumBits
	if bits == 0 {
		bits = 8
	}
	lay, err := CheckPackedInt(codecTensor(w), shape, bits, codecTensor(scale), zp)
	if err != nil {
		return nil, codecError(scheme, w.Name, err)
	}
	gi := -1 // weight_g_idx's place among the companions
	if g, ok := m.Tensors[m.Prefix+"weight_g_idx"]; ok {
		if err := lay.CheckGIdx(codecTensor(g)); err != nil {
			return nil, codecError(scheme, w.Name, err)
		}
		gi = len(comps)
		comps = append(comps, g)
	}
	gIdx := func(comps [][]byte) []byte {
		if gi < 0 || gi >= len(comps) {
			return nil
		}
		return comps[gi]
	}
	bpr := int64(lay.Cols)
	if lay.Packed {
		bpr = int64(codecCeilDiv(lay.Cols*lay.Bits, 32) * 4)
	}
	c := &rowsCodec{rows: int64(lay.Rows), cols: int64(lay.Cols), codeBytes: int64(lay.Rows) * bpr, rowSpan: rowBytes(bpr)}
	round := lay.ScaleDType
	if lay.ZeroPoint == zpPacked {
		// Zero points pack down the rows: rows decode from the whole weight.
		c.rowSpan = nil
		c.dec = func(dst []float32, codes []byte, comps [][]byte, r0, r1 int) error {
			if len(comps) < 2 {
				return fmt.Errorf("%w: weight_zero_point", ErrCodecBuffer)
			}
			return roundRowsTo(round, dst, lay.DequantRowsGIdx(dst, codes, comps[0], comps[1], gIdx(comps), r0, r1))
		}
	} else {
		c.dec = func(dst []float32, codes []byte, comps [][]byte, r0, r1 int) error {
			sub := lay
			sub.Rows = r1 - r0
			sc, z := comps[0], []byte(nil)
			if zp != nil && len(comps) > 1 {
				z = comps[1]
			}
			if !lay.TensorWide {
				ss := lay.Groups * lay.ScaleDType.Size()
				if len(sc) != lay.Rows*ss || z != nil && len(z) != lay.Rows*lay.Groups {
					return fmt.Errorf("%w: weight_scale", ErrCodecBuffer)
				}
				sc = sc[r0*ss : r1*ss]
				if z != nil {
					z = z[r0*lay.Groups : r1*lay.Groups]
				}
			}
			return roundRowsTo(round, dst, sub.DequantRowsGIdx(dst, codes, sc, z, gIdx(comps), 0, r1-r0))
		}
	}
	desc := "per channel"
	switch {
	case lay.TensorWide:
		desc = "per tensor"
	case lay.Groups > 1:
		desc = fmt.Sprintf("groups of %d", lay.Cols/lay.Groups)
	}
	sym := "symmetric"
	if zp != nil {
		sym = "zero points in weight_zero_point"
	}
	if gi >= 0 {
		desc += ", activation order in weight_g_idx"
	}
	return &Group{Name: m.Prefix + "weight", DType: m.DType, Shape: lay.Shape(), Weight: w, Companions: comps, Consumed: consumed, Codec: c,
		Scheme: fmt.Sprintf("%s int%d, %s, %s, scales in weight_scale", scheme, lay.Bits, desc, sym)}, nil
}

// readShape reads a weight_shape tensor: two int64 or int32 sizes.
func readShape(t Stored) ([]int64, error) {
	if t.Read == nil || (t.DType != dtype.Int64 && t.DType != dtype.Int32) || numel(t.Shape) != 2 {
		return nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: %s %s, want two int64 sizes", ErrCompanionShape, t.DType, shapeText(t.Shape))}
	}
	b, err := t.Read()
	if err != nil {
		return nil, &Error{Tensor: t.Name, Err: err}
	}
	es := t.DType.Size()
	if len(b) != 2*es {
		return nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: %d bytes", ErrCompanionShape, len(b))}
	}
	out := make([]int64, 2)
	for i := range out {
		if es == 8 {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		} else {
			out[i] = int64(int32(binary.LittleEndian.Uint32(b[4*i:])))
		}
	}
	return out, nil
}

// roundRowsTo rounds dst to d (bfloat16 or float16; float32 leaves it) after
// a successful decode, as upstream's arithmetic in that dtype does.
func roundRowsTo(d dtype.DType, dst []float32, err error) error {
	if err != nil {
		return err
	}
	switch d {
	case dtype.BFloat16:
		for i, v := range dst {
			dst[i] = dtype.BF16ToF32(dtype.F32ToBF16(v))
		}
	case dtype.Float16:
		for i, v := range dst {
			dst[i] = dtype.F16ToF32(dtype.F32ToF16(v))
		}
	}
	return nil
}
