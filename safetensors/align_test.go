package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestWithDataAlign: the header is padded with spaces to the alignment
// asked for, its length prefix says so, the JSON is unchanged, and the
// file parses with the data where it was declared; a bad alignment is
// refused.
func TestWithDataAlign(t *testing.T) {
	ts := []WriterTensor{{Name: "w", DType: "F32", Shape: []int64{3}}, {Name: "b", DType: "BF16", Shape: []int64{2}}}
	md := map[string]string{"k": "v"}
	plain, _, err := HeaderBytes(ts, md)
	if err != nil {
		t.Fatal(err)
	}
	for _, align := range []int{8, 64, 4096} {
		var out bytes.Buffer
		w, err := NewWriter(&out, ts, md, WithDataAlign(align))
		if err != nil {
			t.Fatal(err)
		}
		hdr := append([]byte{}, out.Bytes()...)
		if len(hdr)%align != 0 || binary.LittleEndian.Uint64(hdr) != uint64(len(hdr)-8) {
			t.Fatalf("align %d: header of %d bytes, prefix %d", align, len(hdr), binary.LittleEndian.Uint64(hdr))
		}
		if got, _, _ := HeaderBytes(ts, md, WithDataAlign(align)); !bytes.Equal(got, hdr) {
			t.Fatalf("align %d: HeaderBytes and NewWriter disagree", align)
		}
		if json := bytes.TrimRight(hdr[8:], " "); !bytes.Equal(json, bytes.TrimRight(plain[8:], " ")) {
			t.Fatalf("align %d: the JSON changed", align)
		}
		for _, x := range w.Order() {
			n, _ := ByteSize(x.DType, x.Shape)
			if _, err := w.WriteTensor(x.Name, bytes.NewReader(bytes.Repeat([]byte{byte(n)}, int(n)))); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f, err := Parse(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("align %d: %v", align, err)
		}
		if f.DataOffset != int64(len(hdr)) {
			t.Fatalf("align %d: data at %d, header %d", align, f.DataOffset, len(hdr))
		}
	}
	for _, bad := range []int{0, -8, 12} {
		if _, _, err := HeaderBytes(ts, md, WithDataAlign(bad)); !errors.Is(err, ErrInvalidHeader) {
			t.Errorf("align %d: err %v, want ErrInvalidHeader", bad, err)
		}
	}
}
