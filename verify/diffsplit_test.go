package verify

import (
	"context"
	"math"
	"reflect"
	"testing"
)

// TestDiffSplitMatchesWhole: a pair split into pieces compared on both
// CPUs gives the statistics of the pair compared whole: counts, maxima
// and histogram exactly, the sums within the rounding bound; the pieces
// did happen (splitJobs made several jobs of the large pair, one of the
// small).
func TestDiffSplitMatchesWhole(t *testing.T) {
	const n = 1<<18 + 7
	x, y := mixedPairs(13, n)
	xs, ys := make([]float32, 100), make([]float32, 100)
	a, b := memST(t, [][]float32{x, xs}), memST(t, [][]float32{y, ys})
	run := func(split int64) *DiffReport {
		rep, err := Diff(context.Background(), a, b, WithChunkElements(1<<12), func(c *diffConfig) { c.split = split })
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	whole, split := run(1<<40), run(64<<10)
	for i, w := range whole.Tensors {
		g := split.Tensors[i]
		if g.Differing != w.Differing || g.NaNMismatch != w.NaNMismatch || g.InfMismatch != w.InfMismatch || g.BitwiseEqual != w.BitwiseEqual ||
			g.MaxAbs != w.MaxAbs || g.MaxRel != w.MaxRel || !reflect.DeepEqual(g.Histogram, w.Histogram) || g.acc.n != w.acc.n || g.acc.finite != w.acc.finite {
			t.Fatalf("%s split:\n got %+v\nwant %+v", w.Name, g, w)
		}
		for _, p := range [][2]float64{{g.acc.sumD2, w.acc.sumD2}, {g.acc.sumA2, w.acc.sumA2}, {g.acc.sumB2, w.acc.sumB2}} {
			if math.Abs(p[0]-p[1]) > 2*sumBound(n, p[1]) {
				t.Errorf("%s: sum %v, want %v", w.Name, p[0], p[1])
			}
		}
	}
	if whole.Tensors[0].Differing == 0 || whole.Tensors[0].NaNMismatch == 0 {
		t.Errorf("the data misses a case: %+v", whole.Tensors[0])
	}
	m := match(a, b, Matching{})
	todo := []*TensorDiff{newTensorDiff(m.rows[0].p, a.Tensors[0]), newTensorDiff(m.rows[1].p, a.Tensors[1])}
	pairs := map[*TensorDiff]*pair{todo[0]: m.rows[0].p, todo[1]: m.rows[1].p}
	jobs, by := splitJobs(todo, pairs, 1<<12, 64<<10)
	if len(by[todo[0]]) < 4 || len(by[todo[1]]) != 1 || len(jobs) != len(by[todo[0]])+1 || by[todo[0]][len(by[todo[0]])-1].hi != n {
		t.Errorf("jobs: %d for the large pair, %d for the small, %d in all", len(by[todo[0]]), len(by[todo[1]]), len(jobs))
	}
}
