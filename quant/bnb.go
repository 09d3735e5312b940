package quant

import (
	"encoding/binary"
	"encoding/json"
	"math"

	"github.com/ckpt-dev/ckpt/dtype"
)

// bitsandbytes as transformers saves it.
//
// 4-bit (NF4, FP4): `weight` U8 [ceil(n/2), 1], two codes per byte with
// the FIRST element in the HIGH nibble; `weight.absmax` F32 [ceil(n/bs)]
// (or, nested, U8 codes of `weight.nested_quant_map` F32 [256] scaled by
// `weight.nested_absmax` F32 per 256 of them, plus the offset);
// `weight.quant_map` F32 [16]; `weight.quant_state.bitsandbytes__nf4`
// (or __fp4) U8: JSON {quant_type, blocksize, dtype, shape, and nested:
// nested_blocksize, nested_dtype, nested_offset}. Value = code[q] *
// absmax[i / blocksize] in float32, the last block possibly short.
// The 4-bit code is bitsandbytes' own table for the quant_type (its
// dequantize_4bit uses get_4bit_type, not the stored quant_map); the
// nested absmax uses the stored nested_quant_map (dequantize_blockwise
// takes state2.code).
//
// LLM.int8: `weight` I8 [out, in] + `SCB` F32 [out]; value =
// float32(q * SCB) * float32(7.874015718698502e-3) (bitsandbytes
// multiplies by 1/127, two float32 roundings, not a division).
//
// Upstream (https://github.com/bitsandbytes-foundation/bitsandbytes):
// bitsandbytes/functional.py get_4bit_type, QuantState.from_dict/as_dict,
// dequantize_4bit (nested: dequantize_blockwise + offset);
// backends/default/ops.py _dequantize_4bit_compute,
// _dequantize_blockwise_compute; _ops.py int8_vectorwise_dequant.

// BnB4State is the JSON of `quant_state.bitsandbytes__<type>`.
type BnB4State struct {
	QuantType       string  `json:"quant_type"`
	Blocksize       int     `json:"blocksize"`
	DType           string  `json:"dtype"`
	Shape           []int64 `json:"shape"`
	NestedBlocksize int     `json:"nested_blocksize"`
	NestedDType     string  `json:"nested_dtype"`
	NestedOffset    float64 `json:"nested_offset"`
}

// ParseBnB4State decodes the quant_state JSON bytes (at most 64 KiB).
func ParseBnB4State(name string, b []byte) (BnB4State, error) {
	var s BnB4State
	t := CodecTensor{Name: name}
	if len(b) > 64<<10 {
		return s, codecErr("bitsandbytes", t, "quant_state of %d bytes", len(b))
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, codecErr("bitsandbytes", t, "quant_state is not JSON: %v", err)
	}
	return s, nil
}

// bnbNF4 is bitsandbytes' NF4 table (functional.py get_4bit_type, the
// float64 literals made float32 by torch.tensor).
var bnbNF4 = func() (t [16]float32) {
	v := [16]float64{-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
		-0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
		0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
		0.7229568362236023, 1.0}
	for i := range t {
		t[i] = float32(v[i])
	}
	return t
}()

// bnbFP4 is bitsandbytes' FP4 table: its values divided, in float32, by
// their largest magnitude 12 (get_4bit_type's data.div_).
var bnbFP4 = func() (t [16]float32) {
	v := [16]float32{0, 0.0625, 8, 12, 4, 6, 2, 3, 0, -0.0625, -8, -12, -4, -6, -2, -3}
	twelve := float32(12)
	for i := range t {
		t[i] = v[i] / twelve
	}
	t[8] = float32(math.Copysign(0, -1))
	return t
}()

// BnB4Layout is a checked bitsandbytes 4-bit weight.
type BnB4Layout struct {
	State  BnB4State
	Elems  int // product of State.Shape
	Blocks int // ceil(Elems / Blocksize)
	Nested bool
	code   *[16]float32
}

// CheckBnB4 validates the companions against the parsed quant_state;
// nestedAbsmax and nestedMap are nil when the state is not nested.
func CheckBnB4(st BnB4State, weight, absmax CodecTensor, nestedAbsmax, nestedMap *CodecTensor) (BnB4Layout, error) {
	const scheme = "bitsandbytes"
	l := BnB4Layout{State: st}
	switch st.QuantType {
	case "nf4":
		l.code = &bnbNF4
	case "fp4":
		l.code = &bnbFP4
	default:
		return l, codecErr(scheme, weight, "quant_type %q, want nf4 or fp4", st.QuantType)
	}
	if st.Blocksize <= 0 || st.Blocksize > 1<<20 {
		return l, codecErr(scheme, weight, "blocksize %d", st.Blocksize)
	}
	sd, err := codecShape(scheme, CodecTensor{weight.Name + " (quant_state shape)", weight.DType, st.Shape}, -1)
	if err != nil {
		return l, err
	}
	l.Elems = 1
	for _, d := range sd {
		l.Elems *= d
	}
	l.Blocks = codecCeilDiv(l.Elems, st.Blocksize)
	wd, err := codecShape(scheme, weight, -1, dtype.Uint8)
	if err != nil {
		return l, err
	}
	if n := product(wd); n != codecCeilDiv(l.Elems, 2) {
		return l, codecErr(scheme, weight, "shape %v holds %d bytes, quant_state shape %v needs %d", weight.Shape, n, st.Shape, codecCeilDiv(l.Elems, 2))
	}
	l.Nested = nestedAbsmax != nil || nestedMap != nil
	want := dtype.Float32
	if l.Nested {
		want = dtype.Uint8
	}
	ad, err := codecShape(scheme, absmax, 1, want)
	if err != nil {
		return l, err
	}
	if ad[0] != l.Blocks {
		return l, codecErr(scheme, absmax, "shape %v, want [%d] (%d elements in blocks of %d)", absmax.Shape, l.Blocks, l.Elems, st.Blocksize)
	}
	if !l.Nested {
		return l, nil
	}
	if nestedAbsmax == nil || nestedMap == nil {
		return l, codecErr(scheme, absmax, "nested quant_state needs both nested_absmax and nested_quant_map")
	}
	if st.NestedBlocksize <= 0 || st.NestedBlocksize > 1<<20 || st.NestedDType != "float32" {
		return l, codecErr(scheme, *nestedAbsmax, "nested_blocksize %d, nested_dtype %q (want float32)", st.NestedBlocksize, st.NestedDType)
	}
	nd, err := codecShape(scheme, *nestedAbsmax, 1, dtype.Float32)
	if err != nil {
		return l, err
	}
	if nd[0] != codecCeilDiv(l.Blocks, st.NestedBlocksize) {
		return l, codecErr(scheme, *nestedAbsmax, "shape %v, want [%d]", nestedAbsmax.Shape, codecCeilDiv(l.Blocks, st.NestedBlocksize))
	}
	md, err := codecShape(scheme, *nestedMap, 1, dtype.Float32)
	if err != nil {
		return l, err
	}
	if md[0] != 256 {
		return l, codecErr(scheme, *nestedMap, "shape %v, want [256]", nestedMap.Shape)
	}
	return l, nil
}

func product(d []int) int {
	n := 1
	for _, x := range d {
		n *= x
	}
	return n
}

// Rows and Cols flatten State.Shape to [Shape[0], rest] (one row for a
// 1-D or 0-D shape).
func (l BnB4Layout) Rows() int {
	if len(l.State.Shape) < 2 {
		return 1
	}
	return int(l.State.Shape[0])
}

// Cols is the row length (see Rows).
func (l BnB4Layout) Cols() int {
	if r := l.Rows(); r > 0 {
		return l.Elems / r
	}
	return 0
}

// DequantRows decodes rows [r0, r1) into dst from the whole weight and
// absmax data (and, nested, nested_absmax and nested_quant_map data).
func (l BnB4Layout) DequantRows(dst []float32, weight, absmax, nestedAbsmax, nestedMap []byte, r0, r1 int) error {
	bufs := []codecBuf{{"weight", weight, codecCeilDiv(l.Elems, 2)}, {"absmax", absmax, l.Blocks * 4}}
	if l.Nested {
		bufs = append(bufs[:1], codecBuf{"absmax", absmax, l.Blocks},
			codecBuf{"nested_absmax", nestedAbsmax, 4 * codecCeilDiv(l.Blocks, l.State.NestedBlocksize)},
			codecBuf{"nested_quant_map", nestedMap, 4 * 256})
	}
	cols := l.Cols()
	if err := codecRows(dst, r0, r1, l.Rows(), cols, bufs...); err != nil {
		return err
	}
	le := binary.LittleEndian
	offset := float32(l.State.NestedOffset)
	blockScale := func(b int) float32 {
		if !l.Nested {
			return math.Float32frombits(le.Uint32(absmax[4*b:]))
		}
		c := math.Float32frombits(le.Uint32(nestedMap[4*int(absmax[b]):]))
		s := math.Float32frombits(le.Uint32(nestedAbsmax[4*(b/l.State.NestedBlocksize):]))
		return float32(c*s) + offset
	}
	i0, i1 := r0*cols, r1*cols
	for i := i0; i < i1; {
		b := i / l.State.Blocksize
		s := blockScale(b)
		end := min(i1, (b+1)*l.State.Blocksize)
		for ; i < end; i++ {
			q := weight[i/2] >> 4
			if i%2 == 1 {
				q = weight[i/2] & 0x0f
			}
			dst[i-i0] = l.code[q] * s
		}
	}
	return nil
}

// Int8Layout is a checked LLM.int8 weight [Rows, Cols].
type Int8Layout struct{ Rows, Cols int }

// CheckInt8 validates `weight` (I8 [out, in]) and `SCB` (F32 [out]).
func CheckInt8(weight, scb CodecTensor) (Int8Layout, error) {
	const scheme = "bitsandbytes int8"
	wd, err := codecShape(scheme, weight, 2, dtype.Int8)
	if err != nil {
		return Int8Layout{}, err
	}
	sd, err := codecShape(scheme, scb, 1, dtype.Float32)
	if err != nil {
		return Int8Layout{}, err
	}
	if sd[0] != wd[0] {
		return Int8Layout{}, codecErr(scheme, scb, "shape %v, want [%d]", scb.Shape, wd[0])
	}
	return Int8Layout{wd[0], wd[1]}, nil
}

// bnbInv127 is bitsandbytes' 7.874015718698502e-3 as a float32.
var bnbInv127 = float32(7.874015718698502e-3)

// DequantRows decodes rows [r0, r1) into dst.
func (l Int8Layout) DequantRows(dst []float32, weight, scb []byte, r0, r1 int) error {
	if err := codecRows(dst, r0, r1, l.Rows, l.Cols, codecBuf{"weight", weight, l.Rows * l.Cols}, codecBuf{"SCB", scb, 4 * l.Rows}); err != nil {
		return err
	}
	for r := r0; r < r1; r++ {
		s := math.Float32frombits(binary.LittleEndian.Uint32(scb[4*r:]))
		out := dst[(r-r0)*l.Cols : (r-r0+1)*l.Cols]
		for c := range out {
			out[c] = float32(float32(int8(weight[r*l.Cols+c]))*s) * bnbInv127
		}
	}
	return nil
}
