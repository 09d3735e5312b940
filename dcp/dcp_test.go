package dcp

import (
	"bytes"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestMetadataParses: what Encode writes, statedict's DCP reader parses
// back to the same items, chunks, locations (offsets past 2^32 included)
// and planner paths.
func TestMetadataParses(t *testing.T) {
	m := &Metadata{Entries: []Entry{
		{FQN: "w", Tensor: true, DType: dtype.BFloat16, Size: []int64{4, 3}, Chunks: []Chunk{
			{Offsets: []int64{0, 0}, Sizes: []int64{2, 3}, Location: Location{"__0_0.distcp", 0, 1000}},
			{Offsets: []int64{2, 0}, Sizes: []int64{2, 3}, Location: Location{"__1_0.distcp", 5 << 32, 70000}},
		}},
		{FQN: "s", Tensor: true, DType: dtype.Float32, Size: []int64{}, Chunks: []Chunk{
			{Offsets: []int64{}, Sizes: []int64{}, Location: Location{"__0_0.distcp", 1000, 900}},
		}},
		{FQN: "opt.step", Path: []any{"opt", "step"}, Value: Location{"__0_0.distcp", 1900, 864}},
		{FQN: "opt.groups.0.lr", Path: []any{"opt", "groups", int64(0), "lr"}, Value: Location{"__0_0.distcp", 2764, 800}},
		{FQN: "opt.groups.300.lr", Path: []any{"opt", "groups", 300, "lr"}, Value: Location{"__0_0.distcp", 3564, 800}},
	}}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	md, err := statedict.ParseDCPMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Items) != 5 {
		t.Fatalf("%d items", len(md.Items))
	}
	w := md.Items[0]
	if w.Name != "w" || !w.IsTensor || w.DType != dtype.BFloat16 || !reflect.DeepEqual(w.Shape, []int64{4, 3}) || len(w.Chunks) != 2 {
		t.Fatalf("w: %+v", w)
	}
	if c := w.Chunks[1]; c.File != "__1_0.distcp" || c.Begin != 5<<32 || c.Length != 70000 || !reflect.DeepEqual(c.Offsets, []int64{2, 0}) {
		t.Errorf("chunk: %+v", c)
	}
	if v := md.Items[2]; v.IsTensor || v.File != "__0_0.distcp" || v.Begin != 1900 || v.Length != 864 {
		t.Errorf("value: %+v", v)
	}
	if !reflect.DeepEqual(md.Paths["opt.step"], []any{"opt", "step"}) || !reflect.DeepEqual(md.Paths["w"], []any{"w"}) ||
		!reflect.DeepEqual(md.Paths["opt.groups.0.lr"], []any{"opt", "groups", int64(0), "lr"}) ||
		!reflect.DeepEqual(md.Paths["opt.groups.300.lr"], []any{"opt", "groups", int64(300), "lr"}) {
		t.Errorf("paths %v", md.Paths)
	}
	// Equal metadata, equal bytes (the save_id comes from the content).
	b2, _ := m.Encode()
	if !bytes.Equal(b, b2) {
		t.Error("two encodings differ")
	}
}

// TestMetadataInvalid: metadata torch could not load is refused.
func TestMetadataInvalid(t *testing.T) {
	loc := Location{"f", 0, 1}
	for _, m := range []*Metadata{
		{Entries: []Entry{{FQN: ""}}},
		{Entries: []Entry{{FQN: "a", Value: loc}, {FQN: "a", Value: loc}}},
		{Entries: []Entry{{FQN: "a", Tensor: true, DType: dtype.Float32, Size: []int64{2},
			Chunks: []Chunk{{Offsets: []int64{1}, Sizes: []int64{2}, Location: loc}}}}},
		{Entries: []Entry{{FQN: "a", Value: Location{"f", -1, 1}}}},
		{Entries: []Entry{{FQN: "a", Value: loc}}, Order: []ItemRef{{Entry: 1}}},
	} {
		if _, err := m.Encode(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", m.Entries, err)
		}
	}
}

// TestTensorLength: the measured length is the written one, across
// payload sizes around the 64-byte alignment, and the item is a torch
// zip statedict opens to the same tensor.
func TestTensorLength(t *testing.T) {
	for _, n := range []int64{0, 1, 63, 64, 65, 1000, 4097} {
		s := TensorSpec{DType: dtype.Float16, Shape: []int64{n}}
		data := bytes.Repeat([]byte{7, 1}, int(n))
		var buf bytes.Buffer
		got, err := WriteTensor(&buf, s, bytes.NewReader(data), 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := TensorLength(s)
		if err != nil || got != want || int64(buf.Len()) != got {
			t.Fatalf("n=%d: wrote %d (buffer %d), measured %d (%v)", n, got, buf.Len(), want, err)
		}
		f := filepath.Join(t.TempDir(), "item.pt")
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := statedict.Open(f)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if len(ck.Tensors) != 1 {
			t.Fatalf("n=%d: %d tensors", n, len(ck.Tensors))
		}
		b, err := ck.Tensors[0].ReadAll()
		if err != nil || !bytes.Equal(b, data) {
			t.Errorf("n=%d: data differs (%v)", n, err)
		}
		ck.Close()
	}
	// Too few bytes is an error, not a short item.
	if _, err := WriteTensor(io.Discard, TensorSpec{DType: dtype.Float32, Shape: []int64{4}}, bytes.NewReader(make([]byte, 15)), 0); err == nil {
		t.Error("a short tensor was written")
	}
}

// TestValueLength: values measure as they write.
func TestValueLength(t *testing.T) {
	for _, v := range []any{nil, int64(5), "hello", 0.5, big.NewInt(1 << 62), []byte{1, 2}} {
		var buf bytes.Buffer
		n, err := WriteValue(&buf, v)
		m, err2 := ValueLength(v)
		if err != nil || err2 != nil || n != m || int64(buf.Len()) != n {
			t.Errorf("%v: wrote %d, measured %d (%v, %v)", v, n, m, err, err2)
		}
	}
	if _, err := WriteValue(io.Discard, struct{}{}); err == nil {
		t.Error("an unsupported value was written")
	}
}

// BenchmarkTensorLength measures a 256 MiB tensor's item length without
// its data (what part 0 of a split conversion does for the others' items).
func BenchmarkTensorLength(b *testing.B) {
	s := TensorSpec{DType: dtype.Float32, Shape: []int64{64 << 20}}
	b.SetBytes(s.NBytes())
	for b.Loop() {
		if _, err := TensorLength(s); err != nil {
			b.Fatal(err)
		}
	}
}
