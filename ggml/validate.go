package ggml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrNonFinite: Validate found a NaN or infinite value or scale.
var ErrNonFinite = errors.New("non-finite value")

// Validate checks data, whole blocks of type t, as ggml's
// ggml_validate_row_data does before using a tensor from a file: no NaN
// or infinity among F32, F16 and BF16 values, nor an F64 value that is
// NaN or rounds to an infinite float32, nor in any block's
// fp16 (or, for Q8_K, float32) scales, and no MXFP4 exponent 0xFF. The
// integer types have nothing to check. Unlike ggml, which rejects Q8_1
// outright, Q8_1 blocks are checked like Q4_1 (d and s).
//
// The error names the first bad block (element, for the plain types).
func Validate(t Type, data []byte) error {
	if !t.Known() {
		return &TypeError{Op: "validate", Type: t, Err: ErrUnknownType}
	}
	bs := int(t.TypeSize())
	if len(data)%bs != 0 {
		return &TypeError{Op: "validate", Type: t, Msg: fmt.Sprintf("%d bytes, block %d bytes", len(data), bs), Err: ErrSize}
	}
	nb := len(data) / bs
	bad := func(i int, what string) error {
		return &TypeError{Op: "validate", Type: t, Msg: fmt.Sprintf("%s in block %d", what, i), Err: ErrNonFinite}
	}
	// Offsets of the fp16 scales in a block.
	var offs []int
	switch t {
	case I8, I16, I32, I64:
		return nil
	case F32:
		for i := 0; i < nb; i++ {
			if binary.LittleEndian.Uint32(data[4*i:])&0x7f800000 == 0x7f800000 {
				return bad(i, "NaN or infinity")
			}
		}
		return nil
	case F64:
		for i := 0; i < nb; i++ {
			// ggml checks the value converted to float: a double out of
			// float range counts as infinite.
			if f := float32(math.Float64frombits(binary.LittleEndian.Uint64(data[8*i:]))); f != f || f > math.MaxFloat32 || f < -math.MaxFloat32 {
				return bad(i, "NaN or infinity")
			}
		}
		return nil
	case F16:
		for i := 0; i < nb; i++ {
			if binary.LittleEndian.Uint16(data[2*i:])&0x7c00 == 0x7c00 {
				return bad(i, "NaN or infinity")
			}
		}
		return nil
	case BF16:
		for i := 0; i < nb; i++ {
			if binary.LittleEndian.Uint16(data[2*i:])&0x7f80 == 0x7f80 {
				return bad(i, "NaN or infinity")
			}
		}
		return nil
	case Q8_K:
		for i := 0; i < nb; i++ {
			if binary.LittleEndian.Uint32(data[bs*i:])&0x7f800000 == 0x7f800000 {
				return bad(i, "NaN or infinite scale")
			}
		}
		return nil
	case MXFP4:
		for i := 0; i < nb; i++ {
			if data[bs*i] == 0xff {
				return &TypeError{Op: "validate", Type: t, Msg: fmt.Sprintf("exponent 0xff in block %d", i), Err: ErrNonFinite}
			}
		}
		return nil
	case IQ1_M:
		for i := 0; i < nb; i++ {
			sc := data[bs*i+48 : bs*i+56]
			h := le16(sc[0:])>>12 | (le16(sc[2:])>>8)&0x00f0 | (le16(sc[4:])>>4)&0x0f00 | le16(sc[6:])&0xf000
			if h&0x7c00 == 0x7c00 {
				return bad(i, "NaN or infinite scale")
			}
		}
		return nil
	case Q4_1, Q5_1, Q8_1, Q4_K, Q5_K:
		offs = []int{0, 2}
	case Q2_K:
		offs = []int{80, 82}
	case Q3_K:
		offs = []int{108}
	case Q6_K:
		offs = []int{208}
	case TQ1_0:
		offs = []int{52}
	case TQ2_0:
		offs = []int{64}
	default: // Q4_0, Q5_0, Q8_0, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ4_NL, IQ4_XS
		offs = []int{0}
	}
	for i := 0; i < nb; i++ {
		for _, o := range offs {
			if le16(data[bs*i+o:])&0x7c00 == 0x7c00 {
				return bad(i, "NaN or infinite scale")
			}
		}
	}
	return nil
}
