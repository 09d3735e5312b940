package statedict_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// broadcastZip is what torch.save({"x": torch.tensor([1.5]).expand(2**40),
// "y": torch.tensor([1., 2., NaN, 4.]).expand(3, 4)}) writes (checked with
// torch 1.13: the view keeps stride 0 over a 1-element storage), plus "z",
// a (2^20, 2^20) view broadcast along its first dimension.
func broadcastZip(t *testing.T) []byte {
	t.Helper()
	f32 := func(vs ...float32) []byte {
		b := make([]byte, 0, 4*len(vs))
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	s0 := &torchzip.StorageRef{Key: "0", DType: dtype.Float32, Location: "cpu", NumEl: 1}
	s1 := &torchzip.StorageRef{Key: "1", DType: dtype.Float32, Location: "cpu", NumEl: 4}
	s2 := &torchzip.StorageRef{Key: "2", DType: dtype.Float32, Location: "cpu", NumEl: 1 << 20}
	pkl, err := torchzip.EncodeStateDict([]torchzip.Entry{
		{Name: "x", Tensor: &torchzip.TensorRef{Storage: s0, Shape: []int64{1 << 40}, Strides: []int64{0}}},
		{Name: "y", Tensor: &torchzip.TensorRef{Storage: s1, Shape: []int64{3, 4}, Strides: []int64{0, 1}}},
		{Name: "z", Tensor: &torchzip.TensorRef{Storage: s2, Shape: []int64{1 << 20, 1 << 20}, Strides: []int64{0, 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := torchzip.NewWriter(&buf)
	recs := [][]byte{f32(1.5), f32(1, 2, float32(math.NaN()), 4), make([]byte, 4<<20)}
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if err := zw.WriteRecord("data/"+string(rune('0'+i)), int64(len(r)), bytes.NewReader(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestStatsBroadcast: statistics of a broadcast view cost what its storage
// holds: each distinct element is read once and counted as often as the
// view repeats it.
func TestStatsBroadcast(t *testing.T) {
	b := broadcastZip(t)
	ck, err := statedict.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]statedict.Stats{
		"x": {Count: 1 << 40, Min: 1.5, Max: 1.5, Mean: 1.5},
		"y": {Count: 12, Min: 1, Max: 4, Mean: 7.0 / 3, NaN: 3},
		"z": {Count: 1 << 40, Min: 0, Max: 0, Mean: 0},
	}
	for _, tn := range ck.Tensors {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := statedict.ComputeStats(ctx, tn, nil)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tn.Name, err)
		}
		w := want[tn.Name]
		if st.Count != w.Count || st.Min != w.Min || st.Max != w.Max || math.Abs(st.Mean-w.Mean) > 1e-12 || st.NaN != w.NaN || st.Inf != 0 {
			t.Errorf("%s: %+v, want %+v", tn.Name, st, w)
		}
	}
}
