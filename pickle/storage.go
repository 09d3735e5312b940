package pickle

import (
	"strconv"
	"strings"
	"sync"
)

// storageClasses maps classic typed storage classes to their dtype.
var storageClasses = sync.OnceValue(func() map[string]string {
	return map[string]string{
		"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
		"BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
		"ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
		"ComplexDoubleStorage": "complex128", "ComplexFloatStorage": "complex64",
		"QInt8Storage": "qint8", "QInt32Storage": "qint32", "QUInt8Storage": "quint8",
		"QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4",
	}
})

// storageDTypes returns a pointer to the dtype of a storage class global
// ("" for UntypedStorage), or nil when module.name is not one.
func storageDTypes(module, name string) *string {
	if name == "UntypedStorage" && (module == "torch" || module == "torch.storage") {
		s := ""
		return &s
	}
	if module != "torch" && module != "torch.cuda" {
		return nil
	}
	if d, ok := storageClasses()[name]; ok {
		return &d
	}
	return nil
}

// dtypeNames maps torch.<name> dtype globals to the canonical dtype name
// (built on first use).
var dtypeNames = sync.OnceValue(func() map[string]string {
	m := map[string]string{
		"double": "float64", "float": "float32", "half": "float16", "cdouble": "complex128",
		"cfloat": "complex64", "chalf": "complex32", "long": "int64", "int": "int32", "short": "int16",
	}
	for _, n := range strings.Fields(`float64 float32 float16 bfloat16 complex128 complex64 complex32
		int64 int32 int16 int8 uint8 uint16 uint32 uint64 bool float8_e5m2 float8_e4m3fn
		float8_e5m2fnuz float8_e4m3fnuz float8_e8m0fnu float4_e2m1fn_x2 qint8 quint8 qint32
		quint4x2 quint2x4 bits8 bits1x8 bits2x4 bits4x2 bits16
		int1 int2 int3 int4 int5 int6 int7 uint1 uint2 uint3 uint4 uint5 uint6 uint7`) {
		m[n] = n
	}
	return m
})

func isDTypeGlobal(module, name string) bool {
	_, ok := dtypeNames()[name]
	return ok && module == "torch"
}

// ParseStoragePID parses torch's ('storage', storage_type, key, location,
// numel[, view_metadata]) persistent id, as passed to a WithPersistentLoad
// hook. Legacy view metadata (view_key, offset, size), written by torch <
// 0.4 for storages that are slices of another, is returned in View.
func ParseStoragePID(pid any) (*StorageRef, error) {
	t, ok := pid.(*Tuple)
	if !ok || (len(*t) != 5 && len(*t) != 6) {
		return nil, malformed("persistent id %T is not a 5- or 6-tuple", pid)
	}
	f := *t
	if s, ok := f[0].(string); !ok || s != "storage" {
		return nil, malformed("persistent id does not start with 'storage'")
	}
	cls, ok := f[1].(Global)
	if !ok {
		return nil, malformed("storage type is %T, not a storage class", f[1])
	}
	dt := storageDTypes(cls.Module, cls.Name)
	if dt == nil {
		return nil, malformed("unknown storage class %s", cls)
	}
	ref := &StorageRef{Class: cls.Name, DType: *dt}
	switch k := f[2].(type) {
	case string:
		ref.Key = k
	case int64:
		ref.Key = strconv.FormatInt(k, 10)
	default:
		return nil, malformed("storage key is %T", f[2])
	}
	if ref.Location, ok = f[3].(string); !ok {
		return nil, malformed("storage location is %T", f[3])
	}
	if ref.Numel, ok = f[4].(int64); !ok || ref.Numel < 0 {
		return nil, malformed("storage size %v is not a non-negative integer", f[4])
	}
	if len(f) == 6 && f[5] != nil {
		vm, ok := f[5].(*Tuple)
		if !ok || len(*vm) != 3 {
			return nil, malformed("storage view metadata is not (view_key, offset, size)")
		}
		v := &StorageView{}
		switch k := (*vm)[0].(type) {
		case string:
			v.Key = k
		case int64:
			v.Key = strconv.FormatInt(k, 10)
		default:
			return nil, malformed("storage view key is not a string")
		}
		var ok1, ok2 bool
		v.Offset, ok1 = (*vm)[1].(int64)
		v.Numel, ok2 = (*vm)[2].(int64)
		if !ok1 || !ok2 || v.Offset < 0 || v.Numel < 0 || v.Offset > ref.Numel || v.Numel > ref.Numel-v.Offset {
			return nil, malformed("storage view [%v, +%v) does not fit storage %s of %d elements", (*vm)[1], (*vm)[2], ref.Key, ref.Numel)
		}
		ref.View = v
	}
	return ref, nil
}
