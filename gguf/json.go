package gguf

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// MarshalJSON writes an entry as {"key", "type", "value"}; see
// Array.MarshalJSON for arrays. Floats that JSON cannot hold (NaN, ±Inf)
// are written as the strings "NaN", "+Inf" and "-Inf".
func (kv KV) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Key   string `json:"key"`
		Type  string `json:"type"`
		Value any    `json:"value"`
	}{kv.Key, kv.Type.String(), jsonScalar(kv.Value)})
}

// MarshalJSON writes an array as {"type": "array", "elem", "len",
// "values"}, every element included.
func (a *Array) MarshalJSON() ([]byte, error) {
	var vals any = a.Values
	switch v := a.Values.(type) {
	case []uint8:
		ints := make([]int, len(v)) // not base64, as encoding/json writes []byte
		for i, x := range v {
			ints[i] = int(x)
		}
		vals = ints
	case []float32:
		vals = floatList(len(v), func(i int) float64 { return float64(v[i]) })
	case []float64:
		vals = floatList(len(v), func(i int) float64 { return v[i] })
	}
	return json.Marshal(struct {
		Type   string `json:"type"`
		Elem   string `json:"elem"`
		Len    int    `json:"len"`
		Values any    `json:"values"`
	}{"array", a.Elem.String(), a.Len(), vals})
}

func floatList(n int, at func(int) float64) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = jsonScalar(at(i))
	}
	return out
}

func jsonScalar(v any) any {
	var f float64
	switch x := v.(type) {
	case float32:
		f = float64(x)
	case float64:
		f = x
	default:
		return v
	}
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return v
}

// UnmarshalJSON reads an entry in the form MarshalJSON writes, with the
// Go type of Value restored from "type".
func (kv *KV) UnmarshalJSON(b []byte) error {
	var raw struct {
		Key   string          `json:"key"`
		Type  string          `json:"type"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	t, ok := parseValueType(raw.Type)
	if !ok {
		return fmt.Errorf("gguf: metadata %q: unknown type %q", raw.Key, raw.Type)
	}
	v, err := decodeJSONValue(t, raw.Value)
	if err != nil {
		return fmt.Errorf("gguf: metadata %q: %v", raw.Key, err)
	}
	kv.Key, kv.Type, kv.Value = raw.Key, t, v
	return nil
}

func parseValueType(s string) (ValueType, bool) {
	for i, n := range valueTypeNames {
		if n == s {
			return ValueType(i), true
		}
	}
	return 0, false
}

// ParseValue converts text to a value of type t ("4096" as uint32, "1e-5"
// as float32, "true" as bool; a string as itself).
func ParseValue(t ValueType, s string) (any, error) {
	if t == TypeString {
		return s, nil
	}
	if t == TypeArray {
		return nil, fmt.Errorf("an array value cannot be given as text")
	}
	b := []byte(s)
	if t == TypeFloat32 || t == TypeFloat64 {
		switch s {
		case "nan", "NaN":
			b = []byte(`"NaN"`)
		case "inf", "+inf", "Inf", "+Inf":
			b = []byte(`"+Inf"`)
		case "-inf", "-Inf":
			b = []byte(`"-Inf"`)
		}
	}
	return decodeJSONValue(t, b)
}

func decodeJSONValue(t ValueType, b json.RawMessage) (any, error) {
	switch t {
	case TypeString:
		var s string
		err := json.Unmarshal(b, &s)
		return s, err
	case TypeBool:
		var v bool
		err := json.Unmarshal(b, &v)
		return v, err
	case TypeArray:
		var raw struct {
			Elem   string            `json:"elem"`
			Values []json.RawMessage `json:"values"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, err
		}
		et, ok := parseValueType(raw.Elem)
		if !ok {
			return nil, fmt.Errorf("unknown array element type %q", raw.Elem)
		}
		vals := make([]any, len(raw.Values))
		for i, r := range raw.Values {
			v, err := decodeJSONValue(et, r)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		return arrayOf(et, vals), nil
	case TypeFloat32, TypeFloat64:
		var f float64
		var s string
		if json.Unmarshal(b, &s) == nil {
			switch s {
			case "NaN":
				f = math.NaN()
			case "+Inf":
				f = math.Inf(1)
			case "-Inf":
				f = math.Inf(-1)
			default:
				return nil, fmt.Errorf("float %q", s)
			}
		} else if err := json.Unmarshal(b, &f); err != nil {
			return nil, err
		}
		if t == TypeFloat32 {
			if !math.IsInf(f, 0) && !math.IsNaN(f) && math.Abs(f) > math.MaxFloat32 {
				return nil, fmt.Errorf("%v overflows float32", f)
			}
			return float32(f), nil
		}
		return f, nil
	}
	// Integers, range-checked.
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	if t == TypeUint64 {
		u, err := strconv.ParseUint(n.String(), 10, 64)
		return u, err
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return nil, err
	}
	r := intRanges[t]
	lo, hi := r[0], r[1]
	if i < lo || i > hi {
		return nil, fmt.Errorf("%d is out of range for %s", i, t)
	}
	switch t {
	case TypeUint8:
		return uint8(i), nil
	case TypeInt8:
		return int8(i), nil
	case TypeUint16:
		return uint16(i), nil
	case TypeInt16:
		return int16(i), nil
	case TypeUint32:
		return uint32(i), nil
	case TypeInt32:
		return int32(i), nil
	}
	return i, nil
}

var intRanges = map[ValueType][2]int64{TypeUint8: {0, math.MaxUint8}, TypeInt8: {math.MinInt8, math.MaxInt8},
	TypeUint16: {0, math.MaxUint16}, TypeInt16: {math.MinInt16, math.MaxInt16}, TypeUint32: {0, math.MaxUint32},
	TypeInt32: {math.MinInt32, math.MaxInt32}, TypeInt64: {math.MinInt64, math.MaxInt64}}

// arrayOf builds an Array of element type t from decoded values.
func arrayOf(t ValueType, vals []any) *Array {
	a := &Array{Elem: t}
	switch t {
	case TypeUint8:
		a.Values = collect[uint8](vals)
	case TypeInt8:
		a.Values = collect[int8](vals)
	case TypeUint16:
		a.Values = collect[uint16](vals)
	case TypeInt16:
		a.Values = collect[int16](vals)
	case TypeUint32:
		a.Values = collect[uint32](vals)
	case TypeInt32:
		a.Values = collect[int32](vals)
	case TypeFloat32:
		a.Values = collect[float32](vals)
	case TypeBool:
		a.Values = collect[bool](vals)
	case TypeString:
		a.Values = collect[string](vals)
	case TypeUint64:
		a.Values = collect[uint64](vals)
	case TypeInt64:
		a.Values = collect[int64](vals)
	case TypeFloat64:
		a.Values = collect[float64](vals)
	case TypeArray:
		a.Values = collect[*Array](vals)
	}
	return a
}

func collect[T any](vals []any) []T {
	out := make([]T, len(vals))
	for i, v := range vals {
		out[i] = v.(T)
	}
	return out
}
