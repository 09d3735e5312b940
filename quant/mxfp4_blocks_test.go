package quant

import (
	"errors"
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
)

// TestMXFP4GGMLValues: for every exponent below 255 and random blocks
// (every byte value in every position), ggml's MXFP4 dequantization (package ggml, checked
// bit for bit against ggml's C in its tests) of MXFP4GGML's blocks gives
// DequantRows' values of the gpt-oss blocks (transformers' values,
// mxfp4_test.go), bit for bit but for the sign of zero: ggml's int8
// kvalues_mxfp4 has no -0, so E2M1's code 8 reads +0 there.
func TestMXFP4GGMLValues(t *testing.T) {
	const groups = 255 * 16
	blocks := make([]byte, 16*groups)
	scales := make([]byte, groups)
	r := rand.New(rand.NewSource(17))
	r.Read(blocks) // every byte value at every position, many times over
	for g := range scales {
		scales[g] = byte(g % 255)
	}
	dst := make([]byte, MXFP4GGMLBlockBytes*groups)
	if err := MXFP4GGML(dst, blocks, scales); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 32*groups)
	if err := ggml.Dequantize(ggml.MXFP4, dst, got); err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 32*groups)
	lay := MXFP4Layout{Prefix: []int{groups}, Groups: 1}
	if err := lay.DequantRows(want, blocks, scales, 0, groups); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] == 0 && want[i] == 0) {
			if bad++; bad <= 5 {
				t.Errorf("element %d (exponent %d): ggml %g, DequantRows %g", i, scales[i/32], got[i], want[i])
			}
		}
	}
	if err := ggml.Validate(ggml.MXFP4, dst); err != nil {
		t.Error(err)
	}
}

// TestMXFP4GGMLSizes: buffers that do not match are ErrCodecBuffer.
func TestMXFP4GGMLSizes(t *testing.T) {
	for _, c := range []struct{ dst, blocks, scales int }{{17, 15, 1}, {16, 16, 1}, {34, 16, 1}, {17, 32, 1}} {
		if err := MXFP4GGML(make([]byte, c.dst), make([]byte, c.blocks), make([]byte, c.scales)); !errors.Is(err, ErrCodecBuffer) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if err := MXFP4GGML(nil, nil, nil); err != nil {
		t.Errorf("no groups: %v", err)
	}
}
