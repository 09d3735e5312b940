package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
)

// emptyTensors is a safetensors file of n empty uint8 tensors.
func emptyTensors(n int) []byte {
	var h bytes.Buffer
	h.WriteByte('{')
	for i := range n {
		if i > 0 {
			h.WriteByte(',')
		}
		fmt.Fprintf(&h, `"t%d":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`, i)
	}
	h.WriteByte('}')
	out := binary.LittleEndian.AppendUint64(nil, uint64(h.Len()))
	return append(out, h.Bytes()...)
}

// TestMaxTensors: a header declaring more tensors than the limit (by
// default DefaultMaxTensors) is refused while it is parsed.
func TestMaxTensors(t *testing.T) {
	b := emptyTensors(DefaultMaxTensors + 1)
	if _, err := Parse(bytes.NewReader(b), int64(len(b))); !errors.Is(err, ErrTooManyTensors) {
		t.Fatalf("default limit: %v", err)
	}
	b = emptyTensors(11)
	if _, err := Parse(bytes.NewReader(b), int64(len(b)), WithMaxTensors(10)); !errors.Is(err, ErrTooManyTensors) {
		t.Errorf("limit 10: %v", err)
	}
	if f, err := Parse(bytes.NewReader(b), int64(len(b)), WithMaxTensors(11)); err != nil || len(f.Tensors) != 11 {
		t.Errorf("limit 11: %v", err)
	}
}
