package statedict

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// safetensorsFile is a safetensors file of the given header and data.
func safetensorsFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

// TestSafetensorsF4: safetensors F4 reads as torch's float4_e2m1fn_x2 with
// the last dimension halved (two fp4 values per torch element, as the
// reference's torch bindings load it), F8_E8M0 as float8_e8m0fnu; an F4
// tensor with an odd last dimension or no dimension has no torch shape and
// is refused by name.
func TestSafetensorsF4(t *testing.T) {
	data := []byte{0x21, 0x43, 0x65, 0x87, 0xa9, 0xcb, 0x7f}
	b := safetensorsFile(`{"q":{"dtype":"F4","shape":[2,6],"data_offsets":[0,6]},"s":{"dtype":"F8_E8M0","shape":[1],"data_offsets":[6,7]}}`, data)
	ck, err := NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	q, s := ck.Tensor("q"), ck.Tensor("s")
	if q == nil || s == nil {
		t.Fatalf("tensors %v", ck.Tensors)
	}
	if got := fmt.Sprint(q.DType, q.Shape, q.Strides, q.NBytes()); got != "float4_e2m1fn_x2 [2 3] [3 1] 6" {
		t.Errorf("q: %s", got)
	}
	if got := fmt.Sprint(s.DType, s.Shape); got != "float8_e8m0fnu [1]" {
		t.Errorf("s: %s", got)
	}
	raw, err := q.ReadAll()
	if err != nil || !bytes.Equal(raw, data[:6]) {
		t.Errorf("q data %x, %v", raw, err)
	}
	// A 0-dim F4 tensor (4 bits) is refused by the format itself.
	for _, c := range []struct {
		shape string
		n     int
	}{{"[2,3]", 3}, {"[2,1]", 1}} {
		shape := c.shape
		b := safetensorsFile(fmt.Sprintf(`{"q":{"dtype":"F4","shape":%s,"data_offsets":[0,%d]}}`, shape, c.n), make([]byte, c.n))
		_, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"q"`) || !strings.Contains(err.Error(), "even last dimension") {
			t.Errorf("F4 %s: %v", shape, err)
		}
	}
}

func TestSafetensorsShape(t *testing.T) {
	for _, c := range []struct {
		d         dtype.DType
		torch, st string
		ok        bool
	}{
		{dtype.Float4E2M1FNx2, "[2 3]", "[2 6]", true},
		{dtype.Float4E2M1FNx2, "[0]", "[0]", true},
		{dtype.Float4E2M1FNx2, "[]", "[]", false},
		{dtype.Float32, "[]", "[]", true},
		{dtype.Float8E8M0FNU, "[4]", "[4]", true},
	} {

		shape := parseShape(c.torch)
		got, ok := dtype.SafetensorsShape(c.d, shape)
		if ok != c.ok || ok && fmt.Sprint(got) != c.st {
			t.Errorf("SafetensorsShape(%s, %s) = %v, %v", c.d, c.torch, got, ok)
		}
		if !ok {
			continue
		}
		back, ok := dtype.TorchShape(c.d, got)
		if !ok || fmt.Sprint(back) != c.torch {
			t.Errorf("TorchShape(%s, %v) = %v, %v", c.d, got, back, ok)
		}
	}
	if _, ok := dtype.SafetensorsShape(dtype.Float4E2M1FNx2, []int64{1 << 62}); ok {
		t.Error("overflow not reported")
	}
}

func parseShape(s string) []int64 {
	var out []int64
	for _, f := range strings.Fields(strings.Trim(s, "[]")) {
		var v int64
		fmt.Sscan(f, &v)
		out = append(out, v)
	}
	return out
}
