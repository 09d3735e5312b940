package safetensors

import (
	"fmt"
	"math/bits"
)

// dtypeInfo is one of the format's element types.
type dtypeInfo struct {
	bits   int  // width of one element in bits
	rank   int  // position in the reference library's Dtype enum
	recent bool // added after safetensors 0.4 (see Recent)
}

// dtypes lists the format's dtype codes. rank follows the reference
// library's enum, which is in ascending alignment; its writer orders
// tensors by descending rank, then by name.
var dtypes = map[string]dtypeInfo{
	"BOOL":        {8, 0, false},
	"F4":          {4, 1, true},
	"F6_E2M3":     {6, 2, true},
	"F6_E3M2":     {6, 3, true},
	"U8":          {8, 4, false},
	"I8":          {8, 5, false},
	"F8_E5M2":     {8, 6, false},
	"F8_E4M3":     {8, 7, false},
	"F8_E8M0":     {8, 8, true},
	"F8_E4M3FNUZ": {8, 9, true},
	"F8_E5M2FNUZ": {8, 10, true},
	"I16":         {16, 11, false},
	"U16":         {16, 12, false},
	"F16":         {16, 13, false},
	"BF16":        {16, 14, false},
	"I32":         {32, 15, false},
	"U32":         {32, 16, false},
	"F32":         {32, 17, false},
	"C64":         {64, 18, true},
	"F64":         {64, 19, false},
	"I64":         {64, 20, false},
	"U64":         {64, 21, false},
}

// Recent reports whether the dtype code was added to the format after the
// reference library's 0.4 releases (F4, F6_*, F8_E8M0, F8_*FNUZ, C64):
// older readers refuse a whole file that uses one (safetensors 0.4.5 was
// checked; C64 needs 0.7 or later).
func Recent(dtype string) bool { return dtypes[dtype].recent }

// ElementSize returns the size in bytes of one element of the dtype code.
// It reports false for unknown codes and for the sub-byte dtypes (F4,
// F6_E2M3, F6_E3M2), which have no whole-byte element size; use
// ElementBits or ByteSize for those.
func ElementSize(dtype string) (int, bool) {
	d, ok := dtypes[dtype]
	if !ok || d.bits%8 != 0 {
		return 0, false
	}
	return d.bits / 8, true
}

// ElementBits returns the width in bits of one element of the dtype code,
// or false if the format does not define the code.
func ElementBits(dtype string) (int, bool) {
	d, ok := dtypes[dtype]
	return d.bits, ok
}

// ByteSize returns the number of bytes a tensor of the given dtype and shape
// occupies, computed as the reference does: the element count and the bit
// count use overflow-checked multiplication (ErrOverflow), and the bit
// count must be a whole number of bytes (ErrSizeMismatch). A negative
// dimension is ErrInvalidTensor, an unknown dtype ErrUnknownDType.
func ByteSize(dtype string, shape []int64) (int64, error) {
	d, ok := dtypes[dtype]
	if !ok {
		return 0, fmt.Errorf("%w %q", ErrUnknownDType, dtype)
	}
	dims := make([]uint64, len(shape))
	for i, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("%w: negative dimension %d", ErrInvalidTensor, s)
		}
		dims[i] = uint64(s)
	}
	n, err := byteSize(d, dims)
	if err != nil {
		return 0, err
	}
	return int64(n), nil
}

// byteSize multiplies the dimensions left to right, then by the element
// width in bits, failing on any 64-bit overflow like the reference's
// checked arithmetic, and converts to bytes. The result is below 2^61.
func byteSize(d dtypeInfo, shape []uint64) (uint64, error) {
	numel := uint64(1)
	for _, s := range shape {
		hi, lo := bits.Mul64(numel, s)
		if hi != 0 {
			return 0, fmt.Errorf("%w: element count of shape %v", ErrOverflow, shape)
		}
		numel = lo
	}
	hi, nbits := bits.Mul64(numel, uint64(d.bits))
	if hi != 0 {
		return 0, fmt.Errorf("%w: bit count of %d elements", ErrOverflow, numel)
	}
	if nbits%8 != 0 {
		return 0, fmt.Errorf("%w: %d elements of %d bits is not a whole number of bytes", ErrSizeMismatch, numel, d.bits)
	}
	return nbits / 8, nil
}
