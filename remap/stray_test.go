package remap

import (
	"reflect"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/statedict"
)

// step makes a 0-dim float32 CPU tensor, as torch saves Adam's step.
func step(name string) *statedict.Tensor {
	return &statedict.Tensor{Name: name, DType: dtype.Float32, Device: "cpu",
		Storage: st(name, "cpu", 4), Layout: statedict.Strided}
}

func TestDetectStrays(t *testing.T) {
	w := st("w", "cuda:0", 4000)
	small := st("s", "cuda:0", 400)
	cases := []struct {
		name    string
		tensors []*statedict.Tensor
		want    []Stray
	}{
		{
			name: "cpu tensor in a cuda:0 checkpoint",
			tensors: []*statedict.Tensor{
				tensor("model.w", w, 1000),
				tensor("model.b", st("b", "cuda:0", 40), 10),
				tensor("model.mask", st("m", "cpu", 400), 100),
			},
			want: []Stray{{"model.mask", "cpu", "cuda:0", 400}},
		},
		{
			name: "lone cuda:1 tensor among cuda:0",
			tensors: []*statedict.Tensor{
				tensor("a", st("a", "cuda:0", 400), 100),
				tensor("b", st("b", "cuda:1", 40), 10),
				tensor("c", st("c", "cuda:0", 400), 100),
			},
			want: []Stray{{"b", "cuda:1", "cuda:0", 40}},
		},
		{
			name: "optimizer step counters are expected",
			tensors: []*statedict.Tensor{
				tensor("model.w", w, 1000),
				tensor("optimizer.state.0.exp_avg", st("e", "cuda:0", 4000), 1000),
				step("optimizer.state.0.step"),
				step("state.12.step"),
				step("optimizer_states.0.state.3.step"),
			},
			want: nil,
		},
		{
			name: "step counter on a gpu in a cpu checkpoint is a stray",
			tensors: []*statedict.Tensor{
				tensor("w", st("w", "cpu", 400), 100),
				tensor("optimizer.state.0.step", st("s", "cuda:0", 4)),
			},
			want: []Stray{{"optimizer.state.0.step", "cuda:0", "cpu", 4}},
		},
		{
			name: "names that only look like steps are strays",
			tensors: []*statedict.Tensor{
				tensor("w", w, 1000),
				step("model.step"), // no state.<k>
				step("state.step"), // no <k>
				tensor("optimizer.state.0.step", st("s", "cpu", 8), 2), // two elements
			},
			want: []Stray{
				{"model.step", "cpu", "cuda:0", 4},
				{"state.step", "cpu", "cuda:0", 4},
				{"optimizer.state.0.step", "cpu", "cuda:0", 8},
			},
		},
		{
			name: "all-cpu checkpoint",
			tensors: []*statedict.Tensor{
				tensor("a", st("a", "cpu", 40), 10),
				tensor("b", st("b", "cpu", 4), 1),
				step("opt.state.0.step"),
			},
			want: nil,
		},
		{
			name: "evenly split model-parallel checkpoint has no strays",
			tensors: []*statedict.Tensor{
				tensor("a", st("a", "cuda:0", 400), 100),
				tensor("b", st("b", "cuda:1", 400), 100),
			},
			want: nil,
		},
		{
			name: "model-parallel 60/40 split: only the cpu tensor is a stray",
			tensors: []*statedict.Tensor{
				tensor("a", st("a", "cuda:0", 600), 150),
				tensor("b", st("b", "cuda:1", 400), 100),
				tensor("c", st("c", "cpu", 4), 1),
			},
			want: []Stray{{"c", "cpu", "cuda:0", 4}},
		},
		{
			name: "shared storage counted once when finding the shares",
			tensors: []*statedict.Tensor{
				// 3 views of one 400-byte cuda:0 storage against 6000 bytes on
				// cuda:1: 6% of the bytes (counted three times it would be 17%).
				tensor("a", small, 100), tensor("a2", small, 100), tensor("a3", small, 100),
				tensor("b", st("b", "cuda:1", 6000), 1500),
			},
			want: []Stray{{"a", "cuda:0", "cuda:1", 400}, {"a2", "cuda:0", "cuda:1", 400}, {"a3", "cuda:0", "cuda:1", 400}},
		},
		{
			name: "a lone large tensor among many on another device is a stray",
			tensors: []*statedict.Tensor{
				tensor("a", st("a", "cuda:0", 400), 100), tensor("b", st("b", "cuda:0", 400), 100),
				tensor("c", st("c", "cuda:0", 400), 100), tensor("d", st("d", "cuda:0", 400), 100),
				tensor("e", st("e", "cuda:1", 400), 100),
			},
			want: []Stray{{"e", "cuda:1", "cuda:0", 400}},
		},
		{
			name: "no bytes at all: shares by count",
			tensors: []*statedict.Tensor{
				{Name: "m1", Device: "meta", Shape: []int64{0}},
				{Name: "m2", Device: "meta", Shape: []int64{0}},
				{Name: "m3", Device: "meta", Shape: []int64{0}},
				{Name: "m4", Device: "meta", Shape: []int64{0}},
				{Name: "c", Device: "cuda:0", Shape: []int64{0}, DType: dtype.Float32},
			},
			want: []Stray{{"c", "cuda:0", "meta", 0}},
		},
		{
			name:    "nil and empty input",
			tensors: []*statedict.Tensor{nil},
			want:    nil,
		},
	}
	for _, c := range cases {
		got := DetectStrays(c.tensors)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, c.want)
		}
	}
}

func TestPlanStraysUseSavedTags(t *testing.T) {
	tensors := []*statedict.Tensor{
		tensor("w", st("w", "cuda:0", 400), 100),
		tensor("mask", st("m", "cpu", 40), 10),
	}
	p, err := NewPlan(tensors, To(Device{"cpu", -1}))
	if err != nil {
		t.Fatal(err)
	}
	want := []Stray{{"mask", "cpu", "cuda:0", 40}}
	if !reflect.DeepEqual(p.Strays, want) {
		t.Errorf("plan strays %v, want %v", p.Strays, want)
	}
}
