package dcp_test

// Tests that read what package dcp writes with package statedict (which
// imports dcp, so they live outside package dcp).

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// TestTensorLength: the measured length is the written one, across
// payload sizes around the 64-byte alignment, and the item is a torch
// zip statedict opens to the same tensor.
func TestTensorLength(t *testing.T) {
	for _, n := range []int64{0, 1, 63, 64, 65, 1000, 4097} {
		s := dcp.TensorSpec{DType: dtype.Float16, Shape: []int64{n}}
		data := bytes.Repeat([]byte{7, 1}, int(n))
		var buf bytes.Buffer
		got, err := dcp.WriteTensor(&buf, s, bytes.NewReader(data), 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := dcp.TensorLength(s)
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
	if _, err := dcp.WriteTensor(io.Discard, dcp.TensorSpec{DType: dtype.Float32, Shape: []int64{4}}, bytes.NewReader(make([]byte, 15)), 0); err == nil {
		t.Error("a short tensor was written")
	}
}
