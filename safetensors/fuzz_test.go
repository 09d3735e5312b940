package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// fuzzSeeds are headers, valid and invalid, with their data lengths.
var fuzzSeeds = []struct {
	header string
	data   int
}{
	{`{}`, 0},
	{`{"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`, 16},
	{`{"a":{"dtype":"BF16","shape":[1],"data_offsets":[8,10]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 10},
	{`{"z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"q":{"dtype":"F4","shape":[2,3],"data_offsets":[0,3]}}`, 3},
	{`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":[{"x":null}]}}   `, 1},
	{`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, 1},
	{`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0},
	{`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, 3},
	{`{"__metadata__":{"a":"\u0000\"\\"},"\u00e9":{"dtype":"C64","shape":[],"data_offsets":[0,8]}}`, 8},
	{`{"w":{"dtype":"F6_E3M2","shape":[3],"data_offsets":[0,3]}}`, 3},
	{`[]`, 0},
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(file(s.header, s.data))
	}
	f.Add([]byte{})
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<63))
	f.Fuzz(func(t *testing.T, b []byte) {
		pf, err := parseBytes(b)
		if err != nil {
			if pf != nil {
				t.Fatal("Parse returned a File with an error")
			}
			return
		}
		checkParsed(t, b, pf)
		roundTrip(t, b, pf)
	})
}

// FuzzParseHeader fuzzes the header text with a correct length prefix, so
// that mutations reach header validation and the rewrite check more often.
func FuzzParseHeader(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.header, uint16(s.data))
	}
	f.Fuzz(func(t *testing.T, header string, dataLen uint16) {
		b := file(header, int(dataLen))
		pf, err := parseBytes(b)
		if err != nil {
			return
		}
		checkParsed(t, b, pf)
		roundTrip(t, b, pf)
	})
}

// checkParsed verifies the invariants Parse promises.
func checkParsed(t *testing.T, b []byte, f *File) {
	if f.DataOffset != 8+f.HeaderSize || f.HeaderSize != int64(binary.LittleEndian.Uint64(b)) {
		t.Fatalf("HeaderSize %d, DataOffset %d", f.HeaderSize, f.DataOffset)
	}
	var pos int64
	for i, ti := range f.Tensors {
		if ti.Begin != pos || ti.End < ti.Begin {
			t.Fatalf("tensor %d %q at [%d,%d], previous end %d", i, ti.Name, ti.Begin, ti.End, pos)
		}
		pos = ti.End
		n, err := ByteSize(ti.DType, ti.Shape)
		if err != nil || n != ti.Size() {
			t.Fatalf("tensor %q: ByteSize %d, %v; offsets give %d", ti.Name, n, err, ti.Size())
		}
		if got, ok := f.Lookup(ti.Name); !ok || !reflect.DeepEqual(got, ti) {
			t.Fatalf("Lookup(%q) = %+v, %v", ti.Name, got, ok)
		}
	}
	if f.DataOffset+pos != int64(len(b)) {
		t.Fatalf("tensors end at %d, file has %d bytes", f.DataOffset+pos, len(b))
	}
}

// roundTrip rewrites a parsed file with the Writer and parses it again:
// the same tensors, data and metadata must come back.
func roundTrip(t *testing.T, b []byte, f *File) {
	tensors := make([]WriterTensor, len(f.Tensors))
	for i, ti := range f.Tensors {
		tensors[i] = WriterTensor{ti.Name, ti.DType, ti.Shape}
	}
	var out bytes.Buffer
	w, err := NewWriter(&out, tensors, f.Metadata)
	if errors.Is(err, ErrHeaderTooLarge) {
		return // compact input that the writer's layout pushes over the limit
	}
	if err != nil {
		t.Fatalf("NewWriter refused a parsed file: %v", err)
	}
	for _, wt := range w.Order() {
		ti, _ := f.Lookup(wt.Name)
		if _, err := w.WriteTensor(wt.Name, bytes.NewReader(b[f.DataOffset+ti.Begin:f.DataOffset+ti.End])); err != nil {
			t.Fatalf("WriteTensor(%q): %v", wt.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := out.Bytes()
	f2, err := parseBytes(b2)
	if err != nil {
		t.Fatalf("Parse of rewritten file: %v", err)
	}
	if len(f2.Tensors) != len(f.Tensors) || !reflect.DeepEqual(f2.Metadata, f.Metadata) {
		t.Fatalf("rewritten file differs: %d tensors, metadata %q; want %d, %q", len(f2.Tensors), f2.Metadata, len(f.Tensors), f.Metadata)
	}
	for _, ti := range f.Tensors {
		t2, ok := f2.Lookup(ti.Name)
		if !ok || t2.DType != ti.DType || !reflect.DeepEqual(t2.Shape, ti.Shape) {
			t.Fatalf("tensor %q rewritten as %+v", ti.Name, t2)
		}
		if !bytes.Equal(b[f.DataOffset+ti.Begin:f.DataOffset+ti.End], b2[f2.DataOffset+t2.Begin:f2.DataOffset+t2.End]) {
			t.Fatalf("tensor %q data differs after rewrite", ti.Name)
		}
	}
}
