package dcp

import (
	"errors"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

func TestDCPTiling(t *testing.T) {
	c := func(off, size []int64) Chunk {
		return Chunk{Offsets: off, Sizes: size, Location: Location{File: "__0_0.distcp"}}
	}
	shape := []int64{4, 6}
	cases := []struct {
		name   string
		chunks []Chunk
		want   error
		kept   int
	}{
		{"rows", []Chunk{c([]int64{0, 0}, []int64{2, 6}), c([]int64{2, 0}, []int64{2, 6})}, nil, 2},
		{"blocks", []Chunk{c([]int64{0, 0}, []int64{2, 3}), c([]int64{0, 3}, []int64{2, 3}), c([]int64{2, 0}, []int64{2, 3}), c([]int64{2, 3}, []int64{2, 3})}, nil, 4},
		{"replicated", []Chunk{c([]int64{0, 0}, []int64{4, 6}), c([]int64{0, 0}, []int64{4, 6})}, nil, 1},
		{"empty chunk at the end", []Chunk{c([]int64{0, 0}, []int64{4, 6}), c([]int64{4, 0}, []int64{0, 6})}, nil, 1},
		{"gap", []Chunk{c([]int64{0, 0}, []int64{2, 6}), c([]int64{3, 0}, []int64{1, 6})}, ErrTiling, 2},
		{"overlap", []Chunk{c([]int64{0, 0}, []int64{3, 6}), c([]int64{2, 0}, []int64{2, 6})}, ErrTiling, 0},
		{"outside", []Chunk{c([]int64{0, 0}, []int64{4, 6}), c([]int64{2, 4}, []int64{2, 3})}, ErrTiling, 0},
		{"negative", []Chunk{c([]int64{-1, 0}, []int64{4, 6})}, ErrTiling, 0},
		{"rank mismatch", []Chunk{c([]int64{0}, []int64{4})}, ErrTiling, 0},
		{"no storage entry", []Chunk{{Offsets: []int64{0, 0}, Sizes: []int64{4, 6}}}, ErrMissing, 0},
		{"none", nil, ErrTiling, 0},
	}
	for _, tc := range cases {
		kept, err := CheckTiling(&Entry{FQN: "w", Tensor: true, DType: dtype.Float32, Size: shape, Chunks: tc.chunks})
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
		if tc.want == nil && len(kept) != tc.kept {
			t.Errorf("%s: kept %d chunks, want %d", tc.name, len(kept), tc.kept)
		}
	}
}

// Many chunks along one dimension are checked without pairwise work.
func TestDCPTilingManyChunks(t *testing.T) {
	shape := []int64{100000, 4}
	var cs []Chunk
	for i := int64(0); i < 100000; i++ {
		cs = append(cs, Chunk{Offsets: []int64{99999 - i, 0}, Sizes: []int64{1, 4}, Location: Location{File: "f"}})
	}
	it := &Entry{FQN: "w", Tensor: true, DType: dtype.Float32, Size: shape, Chunks: cs}
	if kept, err := CheckTiling(it); err != nil || len(kept) != 100000 {
		t.Fatalf("%d kept, %v", len(kept), err)
	}
	cs[500].Offsets = []int64{7, 0} // now 7 twice (an overlap) and a gap
	cs[500].Sizes = []int64{2, 4}
	if _, err := CheckTiling(it); !errors.Is(err, ErrTiling) {
		t.Fatalf("overlap: %v", err)
	}
}
