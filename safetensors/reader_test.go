package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// file builds a safetensors file from a raw header and dataLen data bytes
// (byte i of the data buffer is i%251).
func file(header string, dataLen int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	for i := range dataLen {
		b = append(b, byte(i%251))
	}
	return b
}

func parseBytes(b []byte, opts ...Option) (*File, error) {
	return Parse(bytes.NewReader(b), int64(len(b)), opts...)
}

func TestParseValid(t *testing.T) {
	type tensor struct {
		name, dtype string
		shape       []int64
		begin, end  int64
	}
	tests := []struct {
		name   string
		header string
		data   int
		want   []tensor // in file order
		meta   map[string]string
	}{
		{name: "empty", header: `{}`, data: 0},
		{name: "empty padded", header: `{}      `, data: 0},
		{name: "one tensor", header: `{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`, data: 16,
			want: []tensor{{"w", "F32", []int64{2, 2}, 0, 16}}},
		{name: "leading and trailing whitespace", header: " \t\n{\"w\" : {\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}\r\n  ", data: 3,
			want: []tensor{{"w", "I8", []int64{3}, 0, 3}}},
		{name: "field order free and offsets out of name order",
			header: `{"a":{"data_offsets":[8,10],"shape":[1],"dtype":"BF16"},"b":{"shape":[2],"dtype":"F32","data_offsets":[0,8]}}`, data: 10,
			want: []tensor{{"b", "F32", []int64{2}, 0, 8}, {"a", "BF16", []int64{1}, 8, 10}}},
		{name: "metadata", header: `{"__metadata__":{"format":"pt","x":"\"\\\n\u00e9"},"w":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`, data: 1,
			want: []tensor{{"w", "U8", []int64{}, 0, 1}}, meta: map[string]string{"format": "pt", "x": "\"\\\né"}},
		{name: "metadata last", header: `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"__metadata__":{}}`, data: 1,
			want: []tensor{{"w", "U8", []int64{1}, 0, 1}}, meta: map[string]string{}},
		{name: "metadata null", header: `{"__metadata__":null}`, data: 0},
		{name: "scalar", header: `{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}`, data: 8,
			want: []tensor{{"s", "F64", []int64{}, 0, 8}}},
		{name: "zero-size tensors share offsets",
			header: `{"z2":{"dtype":"F32","shape":[4,0],"data_offsets":[4,4]},"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]},"z1":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},"z0":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}`, data: 4,
			want: []tensor{{"z0", "U8", []int64{0}, 0, 0}, {"a", "I32", []int64{1}, 0, 4}, {"z1", "F32", []int64{0}, 4, 4}, {"z2", "F32", []int64{4, 0}, 4, 4}}},
		{name: "unknown entry fields ignored", header: `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":{"a":[1,2,{}]}}}`, data: 1,
			want: []tensor{{"w", "U8", []int64{1}, 0, 1}}},
		{name: "sub-byte F4", header: `{"q":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, data: 3,
			want: []tensor{{"q", "F4", []int64{2, 3}, 0, 3}}},
		{name: "sub-byte F6", header: `{"q":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}`, data: 3,
			want: []tensor{{"q", "F6_E2M3", []int64{4}, 0, 3}}},
		{name: "every byte dtype", data: 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 2 + 2 + 2 + 2 + 4 + 4 + 4 + 8 + 8 + 8 + 8,
			header: `{"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},` +
				`"c":{"dtype":"I8","shape":[1],"data_offsets":[2,3]},"d":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[3,4]},` +
				`"e":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[4,5]},"f":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[5,6]},` +
				`"g":{"dtype":"F8_E4M3FNUZ","shape":[1],"data_offsets":[6,7]},"h":{"dtype":"F8_E5M2FNUZ","shape":[1],"data_offsets":[7,8]},` +
				`"i":{"dtype":"I16","shape":[1],"data_offsets":[8,10]},"j":{"dtype":"U16","shape":[1],"data_offsets":[10,12]},` +
				`"k":{"dtype":"F16","shape":[1],"data_offsets":[12,14]},"l":{"dtype":"BF16","shape":[1],"data_offsets":[14,16]},` +
				`"m":{"dtype":"I32","shape":[1],"data_offsets":[16,20]},"n":{"dtype":"U32","shape":[1],"data_offsets":[20,24]},` +
				`"o":{"dtype":"F32","shape":[1],"data_offsets":[24,28]},"p":{"dtype":"C64","shape":[1],"data_offsets":[28,36]},` +
				`"q":{"dtype":"F64","shape":[1],"data_offsets":[36,44]},"r":{"dtype":"I64","shape":[1],"data_offsets":[44,52]},` +
				`"s":{"dtype":"U64","shape":[1],"data_offsets":[52,60]}}`,
			want: []tensor{{"a", "BOOL", []int64{1}, 0, 1}, {"b", "U8", []int64{1}, 1, 2}, {"c", "I8", []int64{1}, 2, 3},
				{"d", "F8_E5M2", []int64{1}, 3, 4}, {"e", "F8_E4M3", []int64{1}, 4, 5}, {"f", "F8_E8M0", []int64{1}, 5, 6},
				{"g", "F8_E4M3FNUZ", []int64{1}, 6, 7}, {"h", "F8_E5M2FNUZ", []int64{1}, 7, 8}, {"i", "I16", []int64{1}, 8, 10},
				{"j", "U16", []int64{1}, 10, 12}, {"k", "F16", []int64{1}, 12, 14}, {"l", "BF16", []int64{1}, 14, 16},
				{"m", "I32", []int64{1}, 16, 20}, {"n", "U32", []int64{1}, 20, 24}, {"o", "F32", []int64{1}, 24, 28},
				{"p", "C64", []int64{1}, 28, 36}, {"q", "F64", []int64{1}, 36, 44}, {"r", "I64", []int64{1}, 44, 52},
				{"s", "U64", []int64{1}, 52, 60}}},
		{name: "escaped and unicode names", header: `{"a\u0000\"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"ü☃":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, data: 2,
			want: []tensor{{"a\x00\"b", "U8", []int64{1}, 0, 1}, {"ü☃", "U8", []int64{1}, 1, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := file(tc.header, tc.data)
			f, err := parseBytes(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.HeaderSize != int64(len(tc.header)) || f.DataOffset != 8+int64(len(tc.header)) {
				t.Errorf("HeaderSize, DataOffset = %d, %d; want %d, %d", f.HeaderSize, f.DataOffset, len(tc.header), 8+len(tc.header))
			}
			var got []tensor
			for _, ti := range f.Tensors {
				got = append(got, tensor{ti.Name, ti.DType, ti.Shape, ti.Begin, ti.End})
				lt, ok := f.Lookup(ti.Name)
				if !ok || !reflect.DeepEqual(lt, ti) {
					t.Errorf("Lookup(%q) = %+v, %v", ti.Name, lt, ok)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("tensors:\n got %+v\nwant %+v", got, tc.want)
			}
			if !reflect.DeepEqual(f.Metadata, tc.meta) {
				t.Errorf("metadata = %#v, want %#v", f.Metadata, tc.meta)
			}
			if _, ok := f.Lookup("no such tensor"); ok {
				t.Error("Lookup of a missing name succeeded")
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	const ok1 = `"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`
	tests := []struct {
		name   string
		raw    []byte // used instead of header/data when set
		header string
		data   int
		opts   []Option
		want   error
		tensor string // tensor a *HeaderError must name, if any
	}{
		{name: "shorter than length", raw: []byte{1, 0, 0}, want: ErrTruncated},
		{name: "no file", raw: []byte{}, want: ErrTruncated},
		{name: "header longer than file", raw: append(binary.LittleEndian.AppendUint64(nil, 10), "{}"...), want: ErrTruncated},
		{name: "header above 100MB", raw: append(binary.LittleEndian.AppendUint64(nil, DefaultMaxHeaderSize+1), "{}"...), want: ErrHeaderTooLarge},
		{name: "header length 2^64-1", raw: binary.LittleEndian.AppendUint64(nil, 1<<64-1), want: ErrHeaderTooLarge},
		{name: "header above option", header: `{}              `, opts: []Option{WithMaxHeaderSize(8)}, want: ErrHeaderTooLarge},
		{name: "invalid UTF-8", header: "{\"\xff\":{}}", want: ErrInvalidHeader},
		{name: "empty header", header: ``, want: ErrInvalidHeader},
		{name: "not JSON", header: `hello`, want: ErrInvalidHeader},
		{name: "array", header: `[]`, want: ErrInvalidHeader},
		{name: "string", header: `"x"`, want: ErrInvalidHeader},
		{name: "BOM", header: "\ufeff{}", want: ErrInvalidHeader},
		{name: "garbage after object", header: `{} x`, want: ErrInvalidHeader},
		{name: "second object", header: `{}{}`, want: ErrInvalidHeader},
		{name: "NUL padding", header: "{}\x00\x00", want: ErrInvalidHeader},
		{name: "unterminated", header: `{"w":{"dtype":"U8"`, want: ErrInvalidHeader},
		{name: "trailing comma", header: `{` + ok1 + `,}`, data: 1, want: ErrInvalidHeader},
		{name: "entry not object", header: `{"w":1}`, want: ErrInvalidHeader},
		{name: "entry is array", header: `{"w":["U8",[1],[0,1]]}`, data: 1, want: ErrInvalidHeader},
		{name: "missing dtype", header: `{"w":{"shape":[1],"data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "missing shape", header: `{"w":{"dtype":"U8","data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "missing offsets", header: `{"w":{"dtype":"U8","shape":[1]}}`, want: ErrInvalidHeader, tensor: "w"},
		{name: "unknown dtype", header: `{"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, data: 16, want: ErrUnknownDType, tensor: "w"},
		{name: "lowercase dtype", header: `{"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, data: 4, want: ErrUnknownDType, tensor: "w"},
		{name: "torch complex128 not in format", header: `{"w":{"dtype":"C128","shape":[1],"data_offsets":[0,16]}}`, data: 16, want: ErrUnknownDType, tensor: "w"},
		{name: "dtype not string", header: `{"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}`, data: 4, want: ErrInvalidHeader, tensor: "w"},
		{name: "shape not array", header: `{"w":{"dtype":"U8","shape":1,"data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "negative dim", header: `{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, want: ErrInvalidHeader, tensor: "w"},
		{name: "float dim", header: `{"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "exponent dim", header: `{"w":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "string dim", header: `{"w":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "dim above 2^64", header: `{"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "dim above 2^63", header: `{"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,1]}}`, data: 1, want: ErrOverflow, tensor: "w"},
		{name: "one offset", header: `{"w":{"dtype":"U8","shape":[1],"data_offsets":[1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "three offsets", header: `{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "negative offset", header: `{"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}}`, data: 1, want: ErrInvalidHeader, tensor: "w"},
		{name: "first offset not 0", header: `{"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, data: 2, want: ErrInvalidOffsets, tensor: "w"},
		{name: "hole", header: `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, data: 3, want: ErrInvalidOffsets, tensor: "b"},
		{name: "overlap", header: `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, data: 3, want: ErrInvalidOffsets, tensor: "b"},
		{name: "same range twice", header: `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, data: 2, want: ErrInvalidOffsets, tensor: "b"},
		{name: "end before begin", header: `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`, data: 2, want: ErrInvalidOffsets, tensor: "b"},
		{name: "size mismatch", header: `{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}`, data: 12, want: ErrSizeMismatch, tensor: "w"},
		{name: "zero-size with bytes", header: `{"w":{"dtype":"F32","shape":[0],"data_offsets":[0,4]}}`, data: 4, want: ErrSizeMismatch, tensor: "w"},
		{name: "sub-byte not whole bytes", header: `{"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, data: 2, want: ErrSizeMismatch, tensor: "q"},
		{name: "sub-byte F6 not whole bytes", header: `{"q":{"dtype":"F6_E3M2","shape":[3],"data_offsets":[0,3]}}`, data: 3, want: ErrSizeMismatch, tensor: "q"},
		{name: "element count overflow", header: `{"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, want: ErrOverflow, tensor: "w"},
		{name: "overflow before a zero dim", header: `{"w":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}}`, want: ErrOverflow, tensor: "w"},
		{name: "bit count overflow", header: `{"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}`, want: ErrOverflow, tensor: "w"},
		{name: "trailing data", header: `{` + ok1 + `}`, data: 2, want: ErrTrailingData},
		{name: "data truncated", header: `{` + ok1 + `}`, data: 0, want: ErrTruncated},
		{name: "empty header with data", header: `{}`, data: 1, want: ErrTrailingData},
		{name: "duplicate tensor", header: `{` + ok1 + `,` + ok1 + `}`, data: 1, want: ErrDuplicate, tensor: "w"},
		{name: "duplicate tensor via escape", header: `{` + ok1 + `,"\u0077":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, data: 1, want: ErrDuplicate, tensor: "w"},
		{name: "duplicate metadata", header: `{"__metadata__":{},"__metadata__":{}}`, want: ErrDuplicate, tensor: "__metadata__"},
		{name: "duplicate metadata key", header: `{"__metadata__":{"a":"1","a":"2"}}`, want: ErrDuplicate},
		{name: "duplicate field", header: `{"w":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}`, data: 1, want: ErrDuplicate, tensor: "w"},
		{name: "metadata value number", header: `{"__metadata__":{"a":1}}`, want: ErrInvalidHeader},
		{name: "metadata value null", header: `{"__metadata__":{"a":null}}`, want: ErrInvalidHeader},
		{name: "metadata array", header: `{"__metadata__":["a"]}`, want: ErrInvalidHeader},
		{name: "metadata string", header: `{"__metadata__":"a"}`, want: ErrInvalidHeader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.raw
			if b == nil {
				b = file(tc.header, tc.data)
			}
			f, err := parseBytes(b, tc.opts...)
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", f)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Parse error %v, want %v", err, tc.want)
			}
			var he *HeaderError
			if tc.tensor != "" && (!errors.As(err, &he) || he.Tensor != tc.tensor) {
				t.Errorf("error %v does not name tensor %q", err, tc.tensor)
			}
			if !strings.HasPrefix(err.Error(), "safetensors: ") && !strings.HasPrefix(err.Error(), "tensor ") {
				t.Errorf("error %q lacks context", err)
			}
		})
	}
}

// The reference reader accepts exactly 100,000,000 header bytes.
func TestParseHeaderAtLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 100 MB")
	}
	h := make([]byte, DefaultMaxHeaderSize)
	for i := range h {
		h[i] = ' '
	}
	h[0], h[1] = '{', '}'
	if _, err := parseBytes(file(string(h), 0)); err != nil {
		t.Fatalf("Parse of a %d-byte header: %v", len(h), err)
	}
}

type errReaderAt struct{ err error }

func (e errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, e.err }

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	if _, err := Parse(errReaderAt{boom}, 100); !errors.Is(err, boom) {
		t.Fatalf("Parse error %v, want %v", err, boom)
	}
	// A size larger than what the reader holds is a truncated file.
	b := file(`{}`, 0)
	if _, err := Parse(bytes.NewReader(b), int64(len(b))+5); !errors.Is(err, ErrTrailingData) {
		t.Fatalf("Parse error %v, want %v", err, ErrTrailingData)
	}
	if _, err := Parse(bytes.NewReader(b[:9]), int64(len(b))); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Parse error %v, want %v", err, ErrTruncated)
	}
}

// Parse must read only the header, never the data buffer.
func TestParseReadsOnlyHeader(t *testing.T) {
	b := file(`{"w":{"dtype":"F32","shape":[1024],"data_offsets":[0,4096]}}`, 4096)
	hdrEnd := int64(len(b) - 4096)
	r := &limitReaderAt{r: bytes.NewReader(b), limit: hdrEnd}
	if _, err := Parse(r, int64(len(b))); err != nil {
		t.Fatalf("Parse: %v", err)
	}
}

type limitReaderAt struct {
	r     io.ReaderAt
	limit int64
}

func (l *limitReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > l.limit {
		return 0, errors.New("read past the header")
	}
	return l.r.ReadAt(p, off)
}

func TestElementSize(t *testing.T) {
	for code, want := range map[string]int{"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
		"F8_E4M3FNUZ": 1, "F8_E5M2FNUZ": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
		"C64": 8, "F64": 8, "I64": 8, "U64": 8} {
		if got, ok := ElementSize(code); !ok || got != want {
			t.Errorf("ElementSize(%q) = %d, %v; want %d", code, got, ok, want)
		}
		if got, ok := ElementBits(code); !ok || got != 8*want {
			t.Errorf("ElementBits(%q) = %d, %v; want %d", code, got, ok, 8*want)
		}
	}
	for code, want := range map[string]int{"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6} {
		if _, ok := ElementSize(code); ok {
			t.Errorf("ElementSize(%q) reports a whole-byte size", code)
		}
		if got, ok := ElementBits(code); !ok || got != want {
			t.Errorf("ElementBits(%q) = %d, %v; want %d", code, got, ok, want)
		}
	}
	for _, code := range []string{"", "C128", "f32", "F8_E4M3FN", "BFLOAT16"} {
		if _, ok := ElementSize(code); ok {
			t.Errorf("ElementSize(%q) succeeded", code)
		}
		if _, ok := ElementBits(code); ok {
			t.Errorf("ElementBits(%q) succeeded", code)
		}
	}
}

func TestByteSize(t *testing.T) {
	tests := []struct {
		dtype string
		shape []int64
		want  int64
		err   error
	}{
		{"F32", nil, 4, nil},
		{"F32", []int64{2, 3}, 24, nil},
		{"BF16", []int64{0, 7}, 0, nil},
		{"F4", []int64{5, 2}, 5, nil},
		{"F6_E2M3", []int64{8}, 6, nil},
		{"F4", []int64{1}, 0, ErrSizeMismatch},
		{"F32", []int64{-1}, 0, ErrInvalidTensor},
		{"X", []int64{1}, 0, ErrUnknownDType},
		{"U8", []int64{1 << 62, 4}, 0, ErrOverflow},
		{"U64", []int64{1 << 61}, 0, ErrOverflow},
	}
	for _, tc := range tests {
		got, err := ByteSize(tc.dtype, tc.shape)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ByteSize(%q, %v) = %d, %v; want %d, %v", tc.dtype, tc.shape, got, err, tc.want, tc.err)
		}
	}
}
