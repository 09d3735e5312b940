package dcp

import (
	"bytes"
	"errors"
	"io"
	"math/big"
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
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
	md, err := ParseMetadata(b)
	if err != nil {
		t.Fatal(err)
	}
	// What was written, as a reader sees it: every entry's path spelled
	// out (its FQN when it had none), list indices as int64.
	want := *m
	want.Planned = true
	want.Entries = nil
	for _, e := range m.Entries {
		switch {
		case len(e.Path) == 0:
			e.Path = []any{e.FQN}
		default:
			p := make([]any, len(e.Path))
			for i, k := range e.Path {
				if n, ok := k.(int); ok {
					k = int64(n)
				}
				p[i] = k
			}
			e.Path = p
		}
		want.Entries = append(want.Entries, e)
	}
	if !reflect.DeepEqual(md, &want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", md.Entries, want.Entries)
	}
	if c := md.Entries[0].Chunks[1]; c.File != "__1_0.distcp" || c.Offset != 5<<32 {
		t.Errorf("chunk past 2^32: %+v", c)
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
