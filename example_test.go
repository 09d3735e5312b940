package ckpt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/remap"
)

// The one-call form: load every tensor into host memory and read one as
// []float32 without copying.
func ExampleLoad() {
	ctx := context.Background()
	m, err := ckpt.Load(ctx, "testdata/fixtures/zip_basic.pt", ckpt.WithMapLocation("cpu"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	for _, t := range m.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Device)
	}
	bias, _ := m.Tensor("encoder.bias")
	v, err := ckpt.View[float32](bias)
	fmt.Println(v, err)
	// Output:
	// encoder.weight float32 [3 4] cpu
	// encoder.bias float32 [3] cpu
	// decoder.weight float16 [2 3] cpu
	// steps int64 [5] cpu
	// mask bool [3] cpu
	// ids int32 [2 3] cpu
	// [0.5 -1.5 2] <nil>
}

// Open reads only the metadata: names, dtypes, shapes, saved devices.
func ExampleOpen() {
	ck, err := ckpt.Open(context.Background(), "testdata/fixtures/cuda_tagged.pt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ck.Close()
	for _, t := range ck.Tensors {
		fmt.Println(t.Name, t.Device)
	}
	_, err = ckpt.Open(context.Background(), "ftp://host/model.pt")
	fmt.Println(errors.Is(err, ckpt.ErrUnsupportedSource))
	// Output:
	// gpu0.weight cuda:0
	// gpu0.view cuda:0
	// gpu1.weight cuda:1
	// gpu1.index cuda:1
	// stray cpu
	// true
}

// NewPlan says where every tensor would go, reading no data.
func ExampleNewPlan() {
	ck, err := ckpt.Open(context.Background(), "testdata/fixtures/cuda_tagged.pt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ck.Close()
	plan, err := ckpt.NewPlan(ck, ckpt.WithMapLocation("cuda:1=cuda:0,cpu=cuda:0"))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range plan.Entries {
		fmt.Println(e.Name, e.Source, "->", e.Target)
	}
	// Output:
	// gpu0.weight cuda:0 -> cuda:0
	// gpu0.view cuda:0 -> cuda:0
	// gpu1.weight cuda:1 -> cuda:0
	// gpu1.index cuda:1 -> cuda:0
	// stray cpu -> cuda:0
}

// LoadCheckpoint loads a checkpoint opened elsewhere; here only the tensors
// a filter selects, with the rules built in code.
func ExampleLoadCheckpoint() {
	ctx := context.Background()
	ck, err := ckpt.Open(ctx, "testdata/fixtures/zip_basic.pt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ck.Close()
	m, err := ckpt.LoadCheckpoint(ctx, ck, ckpt.WithRules(remap.To(remap.Device{Type: "cpu", Index: -1})),
		ckpt.WithFilter(func(name string) bool { return strings.HasPrefix(name, "encoder.") }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(len(m.Tensors), m.Host.Bytes)
	// Output: 2 60
}

// View refuses, with an error, a Go type that does not match the dtype.
func ExampleView() {
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/zip_basic.pt")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	half, _ := m.Tensor("decoder.weight") // float16: raw bits as uint16
	bits, err := ckpt.View[uint16](half)
	fmt.Println(len(bits), err)
	_, err = ckpt.View[float32](half)
	fmt.Println(errors.Is(err, ckpt.ErrDType), err)
	steps, _ := m.Tensor("steps")
	n, _ := ckpt.View[int64](steps)
	fmt.Println(n)
	// Output:
	// 6 <nil>
	// true ckpt: dtype does not match the view: tensor "decoder.weight" (float16) as []float32
	// [3 1 4 1 5]
}

// WithStrict refuses checkpoints with tensors saved on an unexpected
// device.
func ExampleWithStrict() {
	_, err := ckpt.Load(context.Background(), "testdata/fixtures/cuda_tagged.pt",
		ckpt.WithMapLocation("cpu"), ckpt.WithStrict())
	var se *ckpt.StrayError
	fmt.Println(errors.Is(err, ckpt.ErrStray), errors.As(err, &se) && se.Strays[0].Name == "stray")
	// Output: true true
}

// WithProgress reports the bytes read so far per stage.
func ExampleWithProgress() {
	var last ckpt.Progress
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/zip_basic.pt",
		ckpt.WithProgress(func(p ckpt.Progress) { last = p }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(last.Stage, last.Done, last.Total)
	// Output: load 139 139
}

// WithDryRun plans and stops: targets are known, nothing is read.
func ExampleWithDryRun() {
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/cuda_tagged.pt",
		ckpt.WithMapLocation("cuda=cpu"), ckpt.WithDryRun())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	t, _ := m.Tensor("gpu1.index")
	_, err = t.Bytes()
	fmt.Println(t.Saved, "->", t.Device, errors.Is(err, ckpt.ErrNotOnHost))
	// Output: cuda:1 -> cpu true
}

// Tensor.Bytes gives any host tensor's logical bytes, little-endian, in C
// order: gathered for a strided view, where View refuses.
func ExampleTensor_Bytes() {
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/tied.pt",
		ckpt.WithFilter(func(name string) bool { return name == "transpose" }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	t, _ := m.Tensor("transpose")
	b, err := t.Bytes()
	_, verr := ckpt.View[float32](t)
	fmt.Println(t.Shape, t.Strides, len(b), err, errors.Is(verr, ckpt.ErrNotContiguous))
	// Output: [4 3] [1 4] 48 <nil> true
}

// A map location that does not parse is an error of package remap, seen
// through errors.Is.
func ExampleWithMapLocation() {
	_, err := ckpt.Load(context.Background(), "testdata/fixtures/zip_basic.pt", ckpt.WithMapLocation("cuda1"))
	fmt.Println(errors.Is(err, remap.ErrDevice))
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/cuda_tagged.pt",
		ckpt.WithMapLocation("cuda:0=cpu,cuda:1=cpu,cpu=cpu"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	fmt.Println(len(m.Tensors), m.Host.Bytes)
	// Output:
	// true
	// 5 56
}

// WithMaxHostBytes refuses, before allocating, a load larger than allowed.
func ExampleWithMaxHostBytes() {
	_, err := ckpt.Load(context.Background(), "testdata/fixtures/zip_basic.pt", ckpt.WithMaxHostBytes(100))
	var le *devicecopy.LimitError
	fmt.Println(errors.As(err, &le), le.Needed, le.Limit)
	// Output: true 139 100
}

// WithFilter loads only the tensors a service needs.
func ExampleWithFilter() {
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/zip_basic.pt",
		ckpt.WithFilter(func(name string) bool { return name == "steps" || name == "mask" }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	for _, t := range m.Tensors {
		fmt.Println(t.Name, t.NBytes)
	}
	fmt.Println(m.Host.Bytes)
	// Output:
	// steps 40
	// mask 3
	// 43
}

// Close frees the loaded memory; data asked for afterwards is an error.
func ExampleModel_Close() {
	m, err := ckpt.Load(context.Background(), "testdata/fixtures/zip_basic.pt")
	if err != nil {
		fmt.Println(err)
		return
	}
	t, _ := m.Tensor("ids")
	fmt.Println(m.Close())
	_, err = ckpt.View[int32](t)
	fmt.Println(errors.Is(err, ckpt.ErrClosed))
	// Output:
	// <nil>
	// true
}
