package dtype

import (
	"fmt"
	"math"
	"slices"
)

// DType is a tensor element type, named as torch names it.
type DType uint8

// The element types torch can save. The zero value is Invalid.
const (
	Invalid DType = iota
	Float64
	Float32
	Float16
	BFloat16
	Complex128
	Complex64
	Complex32
	Int64
	Int32
	Int16
	Int8
	Uint8
	Uint16
	Uint32
	Uint64
	Bool
	Float8E5M2
	Float8E4M3FN
	Float8E5M2FNUZ
	Float8E4M3FNUZ
	Float8E8M0FNU
	Float4E2M1FNx2
	QInt8
	QUInt8
	QInt32
	QUInt4x2
	QUInt2x4
	Bits8
	Bits1x8
	Bits2x4
	Bits4x2
	Bits16
	Float6E2M3FNx4 // safetensors F6_E2M3: four 6-bit values in 3 bytes (no torch dtype)
	Float6E3M2FNx4 // safetensors F6_E3M2: four 6-bit values in 3 bytes (no torch dtype)
	numDTypes
)

type dtypeInfo struct {
	torch   string // torch spelling without "torch."
	size    int    // bytes per element
	storage string // classic typed storage class ("" when untyped only)
	st      string // safetensors code ("" when safetensors has none)
	float   bool   // floating point (castable by convert)
	complex bool
	signed  bool
}

var dtypes = [numDTypes]dtypeInfo{
	Float64:        {"float64", 8, "DoubleStorage", "F64", true, false, true},
	Float32:        {"float32", 4, "FloatStorage", "F32", true, false, true},
	Float16:        {"float16", 2, "HalfStorage", "F16", true, false, true},
	BFloat16:       {"bfloat16", 2, "BFloat16Storage", "BF16", true, false, true},
	Complex128:     {"complex128", 16, "ComplexDoubleStorage", "", false, true, true}, // safetensors has C64 only
	Complex64:      {"complex64", 8, "ComplexFloatStorage", "C64", false, true, true},
	Complex32:      {"complex32", 4, "", "", false, true, true},
	Int64:          {"int64", 8, "LongStorage", "I64", false, false, true},
	Int32:          {"int32", 4, "IntStorage", "I32", false, false, true},
	Int16:          {"int16", 2, "ShortStorage", "I16", false, false, true},
	Int8:           {"int8", 1, "CharStorage", "I8", false, false, true},
	Uint8:          {"uint8", 1, "ByteStorage", "U8", false, false, false},
	Uint16:         {"uint16", 2, "", "U16", false, false, false},
	Uint32:         {"uint32", 4, "", "U32", false, false, false},
	Uint64:         {"uint64", 8, "", "U64", false, false, false},
	Bool:           {"bool", 1, "BoolStorage", "BOOL", false, false, false},
	Float8E5M2:     {"float8_e5m2", 1, "", "F8_E5M2", true, false, true},
	Float8E4M3FN:   {"float8_e4m3fn", 1, "", "F8_E4M3", true, false, true},
	Float8E5M2FNUZ: {"float8_e5m2fnuz", 1, "", "F8_E5M2FNUZ", true, false, true},
	Float8E4M3FNUZ: {"float8_e4m3fnuz", 1, "", "F8_E4M3FNUZ", true, false, true},
	Float8E8M0FNU:  {"float8_e8m0fnu", 1, "", "F8_E8M0", true, false, false},
	Float4E2M1FNx2: {"float4_e2m1fn_x2", 1, "", "F4", false, false, false}, // shape: see SafetensorsShape
	QInt8:          {"qint8", 1, "QInt8Storage", "", false, false, true},
	QUInt8:         {"quint8", 1, "QUInt8Storage", "", false, false, false},
	QInt32:         {"qint32", 4, "QInt32Storage", "", false, false, true},
	QUInt4x2:       {"quint4x2", 1, "QUInt4x2Storage", "", false, false, false},
	QUInt2x4:       {"quint2x4", 1, "QUInt2x4Storage", "", false, false, false},
	Bits8:          {"bits8", 1, "", "", false, false, false},
	Bits1x8:        {"bits1x8", 1, "", "", false, false, false},
	Bits2x4:        {"bits2x4", 1, "", "", false, false, false},
	Bits4x2:        {"bits4x2", 1, "", "", false, false, false},
	Bits16:         {"bits16", 2, "", "", false, false, false},
	Float6E2M3FNx4: {"float6_e2m3fn_x4", 3, "", "F6_E2M3", false, false, false}, // shape: see SafetensorsShape
	Float6E3M2FNx4: {"float6_e3m2fn_x4", 3, "", "F6_E3M2", false, false, false},
}

// String returns torch's spelling of the dtype without the "torch." prefix,
// e.g. "float32", "bfloat16", "float8_e4m3fn".
func (d DType) String() string {
	if d == Invalid || d >= numDTypes {
		return fmt.Sprintf("DType(%d)", uint8(d))
	}
	return dtypes[d].torch
}

// Size is the number of bytes one element occupies in a storage.
// Packed sub-byte types (quint4x2, float4_e2m1fn_x2) report the size of
// the byte that holds several values, as torch's element_size does.
func (d DType) Size() int {
	if d >= numDTypes {
		return 0
	}
	return dtypes[d].size
}

// PerByte is the number of elements one storage byte holds: 2 for
// quint4x2, 4 for quint2x4 (torch packs them, so their storages hold
// ceil(numel / PerByte) bytes), 1 for every other dtype, including
// float4_e2m1fn_x2, whose elements are whole bytes.
func (d DType) PerByte() int64 {
	switch d {
	case QUInt4x2:
		return 2
	case QUInt2x4:
		return 4
	}
	return 1
}

// IsFloat reports whether d is a real floating-point type (float8 through float64).
func (d DType) IsFloat() bool { return d < numDTypes && dtypes[d].float }

// IsComplex reports whether d is a complex type.
func (d DType) IsComplex() bool { return d < numDTypes && dtypes[d].complex }

// IsQuantized reports whether d is one of torch's quantized integer types.
func (d DType) IsQuantized() bool { return d >= QInt8 && d <= QUInt2x4 }

// Safetensors returns the safetensors dtype code ("F32", "BF16", ...) and
// false when the safetensors format has no code for d.
func (d DType) Safetensors() (string, bool) {
	if d >= numDTypes || dtypes[d].st == "" {
		return "", false
	}
	return dtypes[d].st, true
}

// StorageClass returns the classic typed storage class torch pickles for d
// ("FloatStorage"), or "" when torch only writes d through UntypedStorage.
func (d DType) StorageClass() string {
	if d >= numDTypes {
		return ""
	}
	return dtypes[d].storage
}

// Parse accepts torch's spelling with or without the "torch." prefix
// and the common aliases torch also accepts ("float", "half", "long", ...).
func Parse(s string) (DType, bool) {
	if len(s) > 6 && s[:6] == "torch." {
		s = s[6:]
	}
	if d, ok := dtypeAliases[s]; ok {
		return d, true
	}
	for i := Float64; i < numDTypes; i++ {
		if dtypes[i].torch == s {
			return i, true
		}
	}
	return Invalid, false
}

var dtypeAliases = map[string]DType{
	"double": Float64, "float": Float32, "half": Float16, "cdouble": Complex128,
	"cfloat": Complex64, "chalf": Complex32, "long": Int64, "int": Int32,
	"short": Int16, "bf16": BFloat16, "f16": Float16, "f32": Float32, "f64": Float64,
}

// FromStorageClass maps a classic typed storage class name
// ("FloatStorage", "HalfStorage", ...) to its dtype.
func FromStorageClass(class string) (DType, bool) {
	for i := Float64; i < numDTypes; i++ {
		if dtypes[i].storage != "" && dtypes[i].storage == class {
			return i, true
		}
	}
	return Invalid, false
}

// ValuesPerElement is how many values of a safetensors sub-byte dtype
// one element of d packs: 2 for float4_e2m1fn_x2 (F4), 4 for the 3-byte
// float6 elements (F6_E2M3, F6_E3M2), 1 for every other dtype.
func ValuesPerElement(d DType) int64 {
	switch d {
	case Float4E2M1FNx2:
		return 2
	case Float6E2M3FNx4, Float6E3M2FNx4:
		return 4
	}
	return 1
}

// SafetensorsShape returns the shape the safetensors header records for a
// tensor of dtype d and torch shape: the same shape, except for the packed
// dtypes, whose element holds ValuesPerElement values while safetensors'
// F4 and F6 count the values, so the last dimension is multiplied (torch
// [N, M] float4_e2m1fn_x2 is F4 [N, 2M], as the reference library's torch
// bindings write it; float6 [N, M] is F6 [N, 4M]). It reports false for a
// 0-dim packed tensor (no last dimension to multiply) and on overflow.
func SafetensorsShape(d DType, shape []int64) ([]int64, bool) {
	k := ValuesPerElement(d)
	if k == 1 {
		return shape, true
	}
	n := len(shape)
	if n == 0 || shape[n-1] < 0 || shape[n-1] > math.MaxInt64/k {
		return nil, false
	}
	out := slices.Clone(shape)
	out[n-1] *= k
	return out, true
}

// TorchShape is the inverse of SafetensorsShape: the torch shape of a
// safetensors tensor of dtype d (from FromSafetensors) and header
// shape. An F4 tensor needs an even last dimension (an F6 one, a multiple
// of 4) to pack whole elements; it reports false otherwise.
func TorchShape(d DType, shape []int64) ([]int64, bool) {
	k := ValuesPerElement(d)
	if k == 1 {
		return shape, true
	}
	n := len(shape)
	if n == 0 || shape[n-1]%k != 0 {
		return nil, false
	}
	out := slices.Clone(shape)
	out[n-1] /= k
	return out, true
}

// FromSafetensors maps a safetensors dtype code ("F32") to its dtype.
func FromSafetensors(code string) (DType, bool) {
	for i := Float64; i < numDTypes; i++ {
		if dtypes[i].st != "" && dtypes[i].st == code {
			return i, true
		}
	}
	return Invalid, false
}

// SwapUnit is the size of the byte groups that a big-endian storage of this
// dtype swaps: the element size, or half of it for complex types (real and
// imaginary parts swap separately). 1 means nothing to swap.
func (d DType) SwapUnit() int {
	if d.IsComplex() {
		return d.Size() / 2
	}
	return d.Size()
}
