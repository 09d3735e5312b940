package gguf

import (
	"fmt"
	"strconv"
)

// ValueType is the type of a metadata value, numbered as the GGUF
// specification numbers gguf_metadata_value_type.
type ValueType uint32

// The metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool",
	"string", "array", "uint64", "int64", "float64"}

// String returns the type's name as the specification spells it without
// its prefix ("uint32", "string", "array").
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Known reports whether t is a value type of the specification.
func (t ValueType) Known() bool { return int(t) < len(valueTypeNames) }

// size is the encoded size of a scalar of type t (0 for strings and arrays).
func (t ValueType) size() int64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one metadata entry. Value holds the Go value of its Type: uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64,
// int64, float64, or *Array.
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// Array is an array value. Values is a slice of the element type's Go
// type ([]uint32, []string, []float32, []bool, ..., and []*Array for
// arrays of arrays).
type Array struct {
	Elem   ValueType
	Values any
}

// Len returns the number of elements.
func (a *Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []*Array:
		return len(v)
	}
	return 0
}

// Index returns element i as a scalar Go value (or *Array).
func (a *Array) Index(i int) any {
	switch v := a.Values.(type) {
	case []uint8:
		return v[i]
	case []int8:
		return v[i]
	case []uint16:
		return v[i]
	case []int16:
		return v[i]
	case []uint32:
		return v[i]
	case []int32:
		return v[i]
	case []float32:
		return v[i]
	case []bool:
		return v[i]
	case []string:
		return v[i]
	case []uint64:
		return v[i]
	case []int64:
		return v[i]
	case []float64:
		return v[i]
	case []*Array:
		return v[i]
	}
	return nil
}

// Int returns an integer value of any integer type as an int64 (uint64
// values above the int64 range fail).
func (kv KV) Int() (int64, bool) {
	switch v := kv.Value.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint64:
		if v > 1<<63-1 {
			return 0, false
		}
		return int64(v), true
	case int64:
		return v, true
	}
	return 0, false
}

// String returns the value of a string entry.
func (kv KV) String() (string, bool) {
	s, ok := kv.Value.(string)
	return s, ok
}

// Format renders a value for people: scalars as Go would print them,
// strings quoted, arrays as their element type and length with the first
// few elements (at most max).
func Format(v any, max int) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case *Array:
		n := x.Len()
		s := fmt.Sprintf("[%s × %d]", x.Elem, n)
		if n == 0 || max <= 0 {
			return s
		}
		s += " ["
		for i := 0; i < n && i < max; i++ {
			if i > 0 {
				s += ", "
			}
			s += Format(x.Index(i), max)
		}
		if n > max {
			s += ", ..."
		}
		return s + "]"
	}
	return fmt.Sprint(v)
}
