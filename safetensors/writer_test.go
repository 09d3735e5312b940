package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// writeAll writes a file for the tensors, feeding each one the bytes
// data[name], and returns the file.
func writeAll(t *testing.T, tensors []WriterTensor, meta map[string]string, data map[string][]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, tensors, meta)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for _, wt := range w.Order() {
		n, err := w.WriteTensor(wt.Name, bytes.NewReader(data[wt.Name]))
		if err != nil || n != int64(len(data[wt.Name])) {
			t.Fatalf("WriteTensor(%q) = %d, %v", wt.Name, n, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return out.Bytes()
}

// pattern returns n bytes that differ per tensor name.
func pattern(name string, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + len(name)*13 + int(name[0]))
	}
	return b
}

// Byte vectors from the reference library's own serialization tests: a
// single tensor or none, where ordering choices cannot differ.
func TestWriterMatchesReferenceBytes(t *testing.T) {
	f32 := func(vs ...float32) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	data := f32(0, 1, 2, 3, 4, 5)
	tests := []struct {
		name    string
		tensors []WriterTensor
		meta    map[string]string
		data    map[string][]byte
		want    []byte
	}{
		{"attn.0", []WriterTensor{{"attn.0", "F32", []int64{1, 2, 3}}}, nil, map[string][]byte{"attn.0": data},
			append([]byte{64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
				116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
				58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
				101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125}, data...)},
		{"forced alignment", []WriterTensor{{"attn0", "F32", []int64{1, 1, 2, 3}}}, nil, map[string][]byte{"attn0": data},
			append([]byte{72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116,
				121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58,
				91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102,
				115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
				32, 32}, data...)},
		{"empty", nil, nil, nil, []byte{8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32}},
		{"empty with metadata", nil, map[string]string{"framework": "pt"}, nil,
			[]byte{40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
				95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
				116, 34, 125, 125, 32, 32, 32, 32, 32}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := writeAll(t, tc.tensors, tc.meta, tc.data)
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("file:\n got %q\nwant %q", got, tc.want)
			}
			if _, err := parseBytes(got); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
}

func TestHeaderBytesGolden(t *testing.T) {
	tensors := []WriterTensor{
		{"b", "F32", []int64{2}},
		{"c", "U8", []int64{3}},
		{"a", "I64", []int64{1}},
		{"e", "I32", []int64{1}},
		{"d", "BF16", []int64{}},
	}
	hdr, order, err := HeaderBytes(tensors, map[string]string{"z": "1", "format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	// Data order: rank descending (I64 > F32 > I32 > BF16 > U8), then name.
	var names []string
	for _, o := range order {
		names = append(names, o.Name)
	}
	if want := []string{"a", "b", "e", "d", "c"}; !reflect.DeepEqual(names, want) {
		t.Errorf("order = %v, want %v", names, want)
	}
	want := `{"__metadata__":{"format":"pt","z":"1"},` +
		`"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},` +
		`"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},` +
		`"c":{"dtype":"U8","shape":[3],"data_offsets":[22,25]},` +
		`"d":{"dtype":"BF16","shape":[],"data_offsets":[20,22]},` +
		`"e":{"dtype":"I32","shape":[1],"data_offsets":[16,20]}}`
	for len(want)%8 != 0 {
		want += " "
	}
	if got := string(hdr[8:]); got != want {
		t.Errorf("header:\n got %q\nwant %q", got, want)
	}
	if n := binary.LittleEndian.Uint64(hdr[:8]); n != uint64(len(want)) {
		t.Errorf("length prefix %d, want %d", n, len(want))
	}
}

func TestWriterRoundTrip(t *testing.T) {
	tensors := []WriterTensor{
		{"model.embed.weight", "BF16", []int64{5, 3}},
		{"model.norm.weight", "F32", []int64{3}},
		{"model.head.bias", "F64", []int64{}},
		{"ids", "I64", []int64{2, 2}},
		{"mask", "BOOL", []int64{4}},
		{"q", "F8_E4M3", []int64{3, 3}},
		{"packed", "F4", []int64{6}},
		{"c", "C64", []int64{2}},
		{"empty", "F16", []int64{0, 4}},
		{"also.empty", "U8", []int64{0}},
		{"snow☃\"quote\\back\nline\x01", "U16", []int64{1}},
	}
	meta := map[string]string{"format": "pt", "tricky": "\"\\\n\t\x00\x1f\x7f <>&é☃", "": ""}
	data := map[string][]byte{}
	for _, wt := range tensors {
		n, err := ByteSize(wt.DType, wt.Shape)
		if err != nil {
			t.Fatal(err)
		}
		data[wt.Name] = pattern(wt.Name, n)
	}
	b := writeAll(t, tensors, meta, data)

	hdr, order, err := HeaderBytes(tensors, meta)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, hdr) {
		t.Fatal("file does not start with HeaderBytes")
	}
	if len(hdr)%8 != 0 || !bytes.HasSuffix(bytes.TrimRight(hdr, " "), []byte("}")) {
		t.Errorf("header not space-padded to 8: %q", hdr[len(hdr)-10:])
	}
	var total int64
	for _, n := range data {
		total += int64(len(n))
	}
	if int64(len(b)) != int64(len(hdr))+total {
		t.Errorf("file is %d bytes, want %d", len(b), int64(len(hdr))+total)
	}
	// The header is plain JSON too.
	var generic map[string]any
	if err := json.Unmarshal(hdr[8:], &generic); err != nil {
		t.Fatalf("header is not JSON: %v", err)
	}

	f, err := parseBytes(b)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !reflect.DeepEqual(f.Metadata, meta) {
		t.Errorf("metadata = %q, want %q", f.Metadata, meta)
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(tensors))
	}
	// Non-empty tensors appear in the writer's order (empty ones sort by name
	// among tensors sharing their offset).
	var pos int64
	for i, o := range order {
		ti, ok := f.Lookup(o.Name)
		if !ok {
			t.Fatalf("tensor %q missing", o.Name)
		}
		if ti.DType != o.DType || !reflect.DeepEqual(ti.Shape, o.Shape) {
			t.Errorf("tensor %q: %s%v, want %s%v", o.Name, ti.DType, ti.Shape, o.DType, o.Shape)
		}
		if ti.Begin != pos {
			t.Errorf("tensor %d %q begins at %d, want %d", i, o.Name, ti.Begin, pos)
		}
		pos = ti.End
		got := b[f.DataOffset+ti.Begin : f.DataOffset+ti.End]
		if !bytes.Equal(got, data[o.Name]) {
			t.Errorf("tensor %q data differs", o.Name)
		}
	}
}

func TestWriterValidation(t *testing.T) {
	tests := []struct {
		name    string
		tensors []WriterTensor
		meta    map[string]string
		want    error
	}{
		{"duplicate", []WriterTensor{{"a", "F32", nil}, {"a", "F16", nil}}, nil, ErrDuplicate},
		{"unknown dtype", []WriterTensor{{"a", "F128", nil}}, nil, ErrUnknownDType},
		{"negative dim", []WriterTensor{{"a", "F32", []int64{2, -1}}}, nil, ErrInvalidTensor},
		{"reserved name", []WriterTensor{{"__metadata__", "F32", nil}}, nil, ErrInvalidTensor},
		{"invalid UTF-8 name", []WriterTensor{{"a\xff", "F32", nil}}, nil, ErrInvalidTensor},
		{"invalid UTF-8 metadata", nil, map[string]string{"k": "\xc3"}, ErrInvalidHeader},
		{"sub-byte not whole", []WriterTensor{{"a", "F4", []int64{3}}}, nil, ErrSizeMismatch},
		{"overflow", []WriterTensor{{"a", "U8", []int64{1 << 40, 1 << 40}}}, nil, ErrOverflow},
		{"data buffer too large", []WriterTensor{{"a", "U8", []int64{1 << 61}}, {"b", "U8", []int64{1 << 61}}, {"c", "U8", []int64{1 << 61}}}, nil, ErrOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if _, err := NewWriter(&out, tc.tensors, tc.meta); !errors.Is(err, tc.want) {
				t.Fatalf("NewWriter error %v, want %v", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("NewWriter wrote %d bytes despite the error", out.Len())
			}
			if _, _, err := HeaderBytes(tc.tensors, tc.meta); !errors.Is(err, tc.want) {
				t.Fatalf("HeaderBytes error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestWriterStreamErrors(t *testing.T) {
	tensors := []WriterTensor{{"a", "F32", []int64{2}}, {"b", "U8", []int64{3}}}
	newW := func(t *testing.T) *Writer {
		w, err := NewWriter(io.Discard, tensors, nil)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	t.Run("out of order", func(t *testing.T) {
		w := newW(t)
		if _, err := w.WriteTensor("b", bytes.NewReader(make([]byte, 3))); !errors.Is(err, ErrOrder) {
			t.Fatalf("error %v, want %v", err, ErrOrder)
		}
		// Not fatal: the right tensor can still be written.
		if _, err := w.WriteTensor("a", bytes.NewReader(make([]byte, 8))); err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteTensor("b", bytes.NewReader(make([]byte, 3))); err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteTensor("b", bytes.NewReader(nil)); !errors.Is(err, ErrOrder) {
			t.Fatalf("write after the last tensor: %v, want %v", err, ErrOrder)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("short", func(t *testing.T) {
		w := newW(t)
		n, err := w.WriteTensor("a", bytes.NewReader(make([]byte, 5)))
		if !errors.Is(err, ErrDataLength) || n != 5 {
			t.Fatalf("WriteTensor = %d, %v; want 5, %v", n, err, ErrDataLength)
		}
		if _, err := w.WriteTensor("b", bytes.NewReader(make([]byte, 3))); !errors.Is(err, ErrWriterFailed) {
			t.Fatalf("write after failure: %v", err)
		}
		if err := w.Close(); !errors.Is(err, ErrWriterFailed) || !errors.Is(err, ErrDataLength) {
			t.Fatalf("Close: %v", err)
		}
	})
	t.Run("long", func(t *testing.T) {
		w := newW(t)
		if _, err := w.WriteTensor("a", bytes.NewReader(make([]byte, 9))); !errors.Is(err, ErrDataLength) {
			t.Fatalf("error %v, want %v", err, ErrDataLength)
		}
		if err := w.Close(); !errors.Is(err, ErrWriterFailed) {
			t.Fatalf("Close: %v", err)
		}
	})
	t.Run("one byte at a time", func(t *testing.T) {
		w := newW(t)
		if _, err := w.WriteTensor("a", iotest.OneByteReader(bytes.NewReader(make([]byte, 8)))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reader error", func(t *testing.T) {
		w := newW(t)
		boom := errors.New("boom")
		if _, err := w.WriteTensor("a", iotest.ErrReader(boom)); !errors.Is(err, boom) {
			t.Fatalf("error %v, want %v", err, boom)
		}
	})
	t.Run("reader error after data", func(t *testing.T) {
		w := newW(t)
		boom := errors.New("boom")
		r := io.MultiReader(bytes.NewReader(make([]byte, 8)), iotest.ErrReader(boom))
		if _, err := w.WriteTensor("a", r); !errors.Is(err, boom) {
			t.Fatalf("error %v, want %v", err, boom)
		}
	})
	t.Run("incomplete", func(t *testing.T) {
		w := newW(t)
		if _, err := w.WriteTensor("a", bytes.NewReader(make([]byte, 8))); err != nil {
			t.Fatal(err)
		}
		err := w.Close()
		if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), `"b"`) {
			t.Fatalf("Close: %v, want %v naming b", err, ErrIncomplete)
		}
	})
	t.Run("output error", func(t *testing.T) {
		boom := errors.New("disk full")
		if _, err := NewWriter(&failWriter{boom, 0}, tensors, nil); !errors.Is(err, boom) {
			t.Fatalf("NewWriter: %v", err)
		}
		hdr, _, _ := HeaderBytes(tensors, nil)
		w, err := NewWriter(&failWriter{boom, len(hdr)}, tensors, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteTensor("a", bytes.NewReader(make([]byte, 8))); !errors.Is(err, boom) {
			t.Fatalf("WriteTensor: %v", err)
		}
		if err := w.Close(); !errors.Is(err, boom) {
			t.Fatalf("Close: %v", err)
		}
	})
	t.Run("order is a copy", func(t *testing.T) {
		w := newW(t)
		o := w.Order()
		o[0].Name = "x"
		o[0].Shape[0] = 99
		if w.Order()[0].Name != "a" || w.Order()[0].Shape[0] != 2 {
			t.Fatal("Order exposes the writer's state")
		}
	})
}

// failWriter accepts ok bytes, then fails.
type failWriter struct {
	err error
	ok  int
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) <= f.ok {
		f.ok -= len(p)
		return len(p), nil
	}
	return 0, f.err
}
