package torchzip_test

import (
	"bytes"
	"fmt"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// A two-tensor state dict whose tensors share one storage (tied weights).
func Example() {
	st := &torchzip.StorageRef{Key: "0", DType: dtype.Float32, Location: "cpu", NumEl: 4}
	pkl, err := torchzip.EncodeStateDict([]torchzip.Entry{
		{Name: "embed.weight", Tensor: &torchzip.TensorRef{Storage: st, Shape: []int64{2, 2}, Strides: []int64{2, 1}}},
		{Name: "lm_head.weight", Tensor: &torchzip.TensorRef{Storage: st, Shape: []int64{2, 2}, Strides: []int64{2, 1}}},
		{Name: "epoch", Value: int64(3)},
	})
	if err != nil {
		panic(err)
	}
	var out bytes.Buffer
	zw := torchzip.NewWriter(&out)
	_ = zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl))
	_ = zw.WriteRecord("data/0", 16, bytes.NewReader(make([]byte, 16)))
	if err := zw.Close(); err != nil {
		panic(err)
	}

	ck, err := statedict.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ck.Tensors), "tensors,", len(ck.Storages), "storage, epoch", ck.Objects[0].Value)
	// Output: 2 tensors, 1 storage, epoch 3
}

// Reading the container back: the records under the top folder, found by
// the names torch uses, and a stored record's bytes in place.
func ExampleNewReader() {
	var out bytes.Buffer
	zw := torchzip.NewWriter(&out)
	_ = zw.WriteRecord("data.pkl", 2, bytes.NewReader([]byte{0x80, 0x02}))
	_ = zw.WriteRecord("data/0", 8, bytes.NewReader([]byte("weights!")))
	if err := zw.Close(); err != nil {
		panic(err)
	}

	z, err := torchzip.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		panic(err)
	}
	fmt.Println(z.Prefix(), z.Keys())
	rec, _ := z.Record("data/0")
	sec, err := rec.Data()
	if err != nil {
		panic(err)
	}
	b := make([]byte, rec.Size())
	_, _ = sec.ReadAt(b, 0)
	_, off, _ := sec.Outer()
	fmt.Printf("%s: %q at offset %d\n", rec.Name(), b, off)
	// Output:
	// archive [data.pkl data/0 version]
	// archive/data/0: "weights!" at offset 192
}
