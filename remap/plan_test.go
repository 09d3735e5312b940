package remap

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// st makes a storage of n bytes saved with tag.
func st(key, tag string, n int64) *statedict.Storage {
	return &statedict.Storage{Key: key, Location: tag, DType: dtype.Float32, NBytes: n}
}

// tensor makes a float32 tensor of the given shape viewing s.
func tensor(name string, s *statedict.Storage, shape ...int64) *statedict.Tensor {
	strides := make([]int64, len(shape))
	step := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = step
		step *= shape[i]
	}
	tag := ""
	if s != nil {
		tag = s.Location
	}
	return &statedict.Tensor{Name: name, DType: dtype.Float32, Shape: shape, Strides: strides,
		Device: tag, Storage: s, Layout: statedict.Strided}
}

func mustParse(t *testing.T, s string) Rules {
	t.Helper()
	r, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPlanSharedStorages(t *testing.T) {
	emb := st("0", "cuda:0", 4000) // tied: embed and lm_head
	w1 := st("1", "cuda:1", 400)   // w1 and a view of its first half
	bias := st("2", "cuda:0", 40)  //
	counts := st("3", "cpu", 8)    // a CPU buffer
	tensors := []*statedict.Tensor{
		tensor("embed.weight", emb, 10, 100),
		tensor("w1.weight", w1, 10, 10),
		tensor("w1.half", w1, 5, 10),
		tensor("b", bias, 10),
		tensor("lm_head.weight", emb, 10, 100),
		tensor("counts", counts, 2),
	}

	// Swap the GPUs: cuda:0 storages -> cuda:1, cuda:1 -> cuda:0, cpu stays.
	p, err := NewPlan(tensors, mustParse(t, "cuda:0=cuda:1,cuda:1=cuda:0"))
	if err != nil {
		t.Fatal(err)
	}
	wantEntries := []Entry{
		{"embed.weight", "cuda:0", Device{"cuda", 1}, 4000},
		{"w1.weight", "cuda:1", Device{"cuda", 0}, 400},
		{"w1.half", "cuda:1", Device{"cuda", 0}, 200},
		{"b", "cuda:0", Device{"cuda", 1}, 40},
		{"lm_head.weight", "cuda:0", Device{"cuda", 1}, 4000},
		{"counts", "cpu", Device{"cpu", -1}, 8},
	}
	if !reflect.DeepEqual(p.Entries, wantEntries) {
		t.Errorf("entries:\n got %v\nwant %v", p.Entries, wantEntries)
	}
	wantDevices := []DeviceUse{
		{Device{"cpu", -1}, 8, 1, 1},
		{Device{"cuda", 0}, 400, 2, 1},
		{Device{"cuda", 1}, 4040, 3, 2},
	}
	if got := p.Devices(); !reflect.DeepEqual(got, wantDevices) {
		t.Errorf("devices:\n got %v\nwant %v", got, wantDevices)
	}

	// Everything to the CPU: every distinct storage counted once.
	p, err = NewPlan(tensors, To(Device{"cpu", -1}))
	if err != nil {
		t.Fatal(err)
	}
	wantDevices = []DeviceUse{{Device{"cpu", -1}, 4448, 6, 4}}
	if got := p.Devices(); !reflect.DeepEqual(got, wantDevices) {
		t.Errorf("to cpu:\n got %v\nwant %v", got, wantDevices)
	}
}

func TestPlanResolvesBareDevices(t *testing.T) {
	a, b := st("0", "cuda", 16), st("1", "cpu", 16)
	tensors := []*statedict.Tensor{tensor("a", a, 4), tensor("b", b, 4)}
	cases := []struct {
		rules string
		opts  []Option
		want  []DeviceUse
	}{
		// Bare saved tag "cuda" stays, resolved to the current GPU (0).
		{"cpu=cuda:0", nil, []DeviceUse{{Device{"cuda", 0}, 32, 2, 2}}},
		{"cuda", nil, []DeviceUse{{Device{"cuda", 0}, 32, 2, 2}}},
		{"cuda", []Option{WithCurrentDevice(Device{"cuda", 2})}, []DeviceUse{{Device{"cuda", 2}, 32, 2, 2}}},
		{"cpu:0", nil, []DeviceUse{{Device{"cpu", -1}, 32, 2, 2}}},
		{"cuda=mps", nil, []DeviceUse{{Device{"cpu", -1}, 16, 1, 1}, {Device{"mps", -1}, 16, 1, 1}}},
		{"cpu=xpu", []Option{WithCurrentDevice(Device{"xpu", 1})},
			[]DeviceUse{{Device{"cuda", 0}, 16, 1, 1}, {Device{"xpu", 1}, 16, 1, 1}}},
	}
	for _, c := range cases {
		p, err := NewPlan(tensors, mustParse(t, c.rules), c.opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.rules, err)
		}
		if got := p.Devices(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.rules, got, c.want)
		}
	}
}

func TestPlanDeviceOrder(t *testing.T) {
	var tensors []*statedict.Tensor
	for i, tag := range []string{"xpu:1", "cuda:10", "cuda:2", "mps", "cpu", "cuda:0", "meta"} {
		tensors = append(tensors, tensor(tag, st(tag, tag, int64(i)), 1))
	}
	p, err := NewPlan(tensors, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range p.Devices() {
		got = append(got, u.Device.String())
	}
	want := []string{"cpu", "cuda:0", "cuda:2", "cuda:10", "meta", "mps", "xpu:1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestPlanQuantizedAndStorageless(t *testing.T) {
	q := st("0", "cuda:0", 64)
	scales := st("1", "cuda:0", 32)
	zeros := st("2", "cpu", 32)
	qt := tensor("q.weight", q, 8, 8)
	qt.DType = dtype.QInt8
	qt.Quant = &statedict.Quantization{Scheme: "per_channel_affine",
		Scales: tensor("", scales, 8), Zeros: tensor("", zeros, 8)}
	meta := &statedict.Tensor{Name: "m", DType: dtype.Float32, Shape: []int64{3}, Device: "meta", Meta: true}
	p, err := NewPlan([]*statedict.Tensor{qt, meta}, mustParse(t, "cuda:0=cuda:1"))
	if err != nil {
		t.Fatal(err)
	}
	want := []DeviceUse{
		{Device{"cpu", -1}, 32, 0, 1}, // zero points stay on the CPU
		{Device{"cuda", 1}, 96, 1, 2}, // data + scales
		{Device{"meta", -1}, 0, 1, 0}, // no storage, no bytes
	}
	if got := p.Devices(); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestPlanErrors(t *testing.T) {
	ok := tensor("ok", st("0", "cuda:0", 4), 1)
	huge1 := tensor("h1", st("1", "cpu", math.MaxInt64-1), 1)
	huge2 := tensor("h2", st("2", "cpu", 2), 1)
	neg := tensor("neg", st("3", "cpu", -4), 1)
	overflowShape := tensor("big", st("4", "cpu", 4), math.MaxInt64/2, 4)
	badTag := tensor("bad", st("5", "GPU0", 4), 1)
	badFunc := Func(func(string) (string, bool) { return "gpu:0", true })
	cases := []struct {
		name    string
		tensors []*statedict.Tensor
		rules   Rules
		err     error
	}{
		{"nil tensor", []*statedict.Tensor{ok, nil}, Rules{}, ErrTensor},
		{"total overflows", []*statedict.Tensor{huge1, huge2}, Rules{}, ErrTensor},
		{"negative storage", []*statedict.Tensor{neg}, Rules{}, ErrTensor},
		{"shape overflows", []*statedict.Tensor{overflowShape}, Rules{}, ErrTensor},
		{"unchanged tag is not a device", []*statedict.Tensor{badTag}, Rules{}, ErrSyntax},
		{"function answers garbage", []*statedict.Tensor{ok}, badFunc, ErrDevice},
		{"bad To literal", []*statedict.Tensor{ok}, To(Device{Type: "cuda", Index: 300}), ErrDevice},
	}
	for _, c := range cases {
		if _, err := NewPlan(c.tensors, c.rules); !errors.Is(err, c.err) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.err)
		}
	}
	// A tag that does not parse is fine when a rule moves it anyway.
	if _, err := NewPlan([]*statedict.Tensor{badTag}, To(Device{"cpu", -1})); err != nil {
		t.Errorf("bad tag mapped to cpu: %v", err)
	}
}
