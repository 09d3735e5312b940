package statedict

import (
	"fmt"
	"slices"
	"sort"
)

// maxPairwise bounds the chunks of one tensor checked pairwise for
// overlaps; chunks that split a single dimension are checked in
// O(n log n) whatever their number.
const maxPairwise = 4096

// checkTiling validates an item's chunks against its shape: every chunk
// inside the shape, identical (replicated) chunks once, no overlap, no gap.
func checkTiling(it DCPItem, t *Tensor) ([]Chunk, error) {
	nd := len(it.Shape)
	total := t.NumEl()
	if total < 0 {
		return nil, fmt.Errorf("%w: shape %v", ErrOverflow, it.Shape)
	}
	var kept []Chunk
	var vol int64
	seen := map[string]bool{}
	for _, c := range it.Chunks {
		if len(c.Offsets) != nd || len(c.Sizes) != nd {
			return nil, fmt.Errorf("%w: chunk at %v has %d dimensions, the tensor %d", ErrTiling, c.Offsets, len(c.Sizes), nd)
		}
		v := int64(1)
		for d := range nd {
			o, s := c.Offsets[d], c.Sizes[d]
			if o < 0 || s < 0 || o > it.Shape[d] || s > it.Shape[d]-o {
				return nil, fmt.Errorf("%w: chunk at %v of size %v reaches outside the shape %v", ErrTiling, c.Offsets, c.Sizes, it.Shape)
			}
			v *= s
		}
		if v == 0 {
			continue
		}
		key := fmt.Sprint(c.Offsets, c.Sizes)
		if seen[key] {
			continue // a replicated copy
		}
		seen[key] = true
		if c.File == "" {
			return nil, fmt.Errorf("%w: chunk at %v has no storage entry", ErrMissingRecord, c.Offsets)
		}
		kept = append(kept, c)
		vol += v
		if vol > total {
			break // overlaps; found below
		}
	}
	if err := checkOverlaps(kept, it.Shape); err != nil {
		return nil, err
	}
	if vol != total {
		return kept, fmt.Errorf("%w: chunks cover %d of %d elements (a gap)", ErrTiling, vol, total)
	}
	return kept, nil
}

// checkOverlaps reports two chunks that overlap.
func checkOverlaps(cs []Chunk, shape []int64) error {
	fail := func(a, b Chunk) error {
		return fmt.Errorf("%w: chunks at %v (size %v) and %v (size %v) overlap", ErrTiling, a.Offsets, a.Sizes, b.Offsets, b.Sizes)
	}
	// Chunks that all span every dimension but one, dim, are intervals on it.
	dim := -1
	single := true
	for _, c := range cs {
		for d := range shape {
			if c.Offsets[d] == 0 && c.Sizes[d] == shape[d] {
				continue
			}
			if dim >= 0 && dim != d {
				single = false
			}
			dim = d
		}
	}
	if single {
		if dim < 0 {
			if len(cs) > 1 {
				return fail(cs[0], cs[1])
			}
			return nil
		}
		s := slices.Clone(cs)
		sort.Slice(s, func(i, j int) bool { return s[i].Offsets[dim] < s[j].Offsets[dim] })
		for i := 1; i < len(s); i++ {
			if s[i].Offsets[dim] < s[i-1].Offsets[dim]+s[i-1].Sizes[dim] {
				return fail(s[i-1], s[i])
			}
		}
		return nil
	}
	if len(cs) > maxPairwise {
		return fmt.Errorf("%w: %d chunks split on several dimensions (at most %d are checked)", ErrUnsupported, len(cs), maxPairwise)
	}
	for i := range cs {
		for j := range i {
			if overlap(cs[j], cs[i]) {
				return fail(cs[j], cs[i])
			}
		}
	}
	return nil
}

func overlap(a, b Chunk) bool {
	for d := range a.Offsets {
		if a.Offsets[d]+a.Sizes[d] <= b.Offsets[d] || b.Offsets[d]+b.Sizes[d] <= a.Offsets[d] {
			return false
		}
	}
	return true
}
