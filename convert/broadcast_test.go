package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
	"github.com/ckpt-dev/ckpt/verify"
)

// broadcastCheckpoint is torch.save({"x": torch.tensor([v]).expand(2**40),
// "y": torch.tensor(row).expand(3, 4)}) as torch writes it (the views keep
// stride 0 over their small storages).
func broadcastCheckpoint(t *testing.T, v float32, row [4]float32) *statedict.Checkpoint {
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
	pkl, err := torchzip.EncodeStateDict([]torchzip.Entry{
		{Name: "x", Tensor: &torchzip.TensorRef{Storage: s0, Shape: []int64{1 << 40}, Strides: []int64{0}}},
		{Name: "y", Tensor: &torchzip.TensorRef{Storage: s1, Shape: []int64{3, 4}, Strides: []int64{0, 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := torchzip.NewWriter(&buf)
	zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl))
	zw.WriteRecord("data/0", 4, bytes.NewReader(f32(v)))
	zw.WriteRecord("data/1", 16, bytes.NewReader(f32(row[:]...)))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := statedict.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// TestCompareBroadcast: comparing broadcast views (verify A A on a
// (2^40,) view of one element) costs what the storages hold; differences
// are counted and located in the full tensor.
func TestCompareBroadcast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := broadcastCheckpoint(t, 1.5, [4]float32{1, 2, 3, 4})
	rep, err := verify.Compare(ctx, a, broadcastCheckpoint(t, 1.5, [4]float32{1, 2, 3, 4}), verify.CompareOptions{})
	if err != nil || rep.Compared != 2 || len(rep.Differences) != 0 {
		t.Fatalf("A A: %+v, %v", rep, err)
	}
	rep, err = verify.Compare(ctx, a, broadcastCheckpoint(t, 2.5, [4]float32{1, 2, 9, 4}), verify.CompareOptions{})
	if err != nil || len(rep.Differences) != 2 {
		t.Fatalf("A B: %+v, %v", rep, err)
	}
	for _, d := range rep.Differences {
		want := map[string]string{"x": "1099511627776 of 1099511627776 elements differ, first at flat index 0",
			"y": "3 of 12 elements differ, first at flat index 2"}[d.Name]
		if !strings.HasPrefix(d.Detail, want) {
			t.Errorf("%s: %q, want %q", d.Name, d.Detail, want)
		}
	}
}

// TestConvertBroadcast: safetensors output copies views out contiguous, so
// a (2^40,) broadcast of one float32 would be 4 TiB: Convert refuses it
// before writing anything, naming the tensor and the option; within the
// bound (or with the option raised) views are materialized. .pth output
// keeps the view over its 4-byte storage, tree or flat.
func TestConvertBroadcast(t *testing.T) {
	ctx := context.Background()
	ck := broadcastCheckpoint(t, 1.5, [4]float32{1, 2, 3, 4})
	dir := t.TempDir()
	out := filepath.Join(dir, "o.safetensors")
	_, err := Convert(ctx, ck, out)
	var te *TensorError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &te) || te.Name != "x" ||
		!strings.Contains(err.Error(), "--max-materialized") || !strings.Contains(err.Error(), "4.0 TiB") {
		t.Fatalf("4 TiB view: %v", err)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("left %v", es)
	}
	// y alone: 48 bytes from 16, far within the default.
	sum, err := Convert(ctx, ck, out, WithOnly("y"))
	if err != nil || sum.Bytes != 48 {
		t.Fatalf("y: %+v, %v", sum, err)
	}
	rep, err := verify.Compare(ctx, ck, open(t, out), verify.CompareOptions{})
	if err != nil || rep.Compared != 1 || len(rep.Differences) != 1 || rep.Differences[0].Name != "x" {
		t.Errorf("y compared: %+v, %v", rep, err)
	}
	// An explicit bound applies to everything written.
	_, err = Convert(ctx, ck, filepath.Join(dir, "p.safetensors"), WithOnly("y"), WithMaxMaterialized(40))
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &te) || te.Name != "y" {
		t.Errorf("y past 40 bytes: %v", err)
	}
	if _, err := Convert(ctx, ck, filepath.Join(dir, "p.safetensors"), WithOnly("y"), WithMaxMaterialized(48)); err != nil {
		t.Errorf("y at 48 bytes: %v", err)
	}
	for _, o := range [][]Option{nil, {WithOnly("x", "y")}} { // tree, then flat
		pt := filepath.Join(dir, "o.pt")
		sum, err := Convert(ctx, ck, pt, append(o, WithForce(true))...)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(pt)
		if err != nil || fi.Size() > 4096 || sum.Bytes != 20 {
			t.Errorf(".pt %s: %d bytes of data, %v, %v", sum.Structure, sum.Bytes, fi.Size(), err)
		}
		back := open(t, pt)
		if x := back.Tensor("x"); x == nil || fmt.Sprint(x.Shape, x.Strides, x.Storage.NBytes) != "[1099511627776] [0] 4" {
			t.Errorf(".pt %s: x %+v", sum.Structure, x)
		}
		rep, err := verify.Compare(ctx, ck, back, verify.CompareOptions{})
		if err != nil || rep.Compared != 2 || len(rep.Differences) != 0 {
			t.Errorf(".pt %s compared: %+v, %v", sum.Structure, rep, err)
		}
	}
}
