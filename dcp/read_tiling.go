package dcp

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
)

// maxPairwise bounds the chunks of one tensor checked pairwise for
// overlaps; chunks that split a single dimension are checked in
// O(n log n) whatever their number.
const maxPairwise = 4096

// CheckTiling validates a tensor entry's chunks against its Size: every
// chunk inside the shape, identical (replicated) chunks once, no
// overlap, no gap, every non-empty chunk with a location. It returns the
// chunks a read assembles the tensor from: the non-empty ones, replicated
// copies removed. On a gap it returns them with an ErrTiling error; on
// any other fault, nil and an ErrTiling, ErrMissing, ErrOverflow or
// ErrUnsupported error.
func CheckTiling(e *Entry) ([]Chunk, error) {
	nd := len(e.Size)
	total, ok := numel(e.Size)
	if !ok {
		return nil, fmt.Errorf("%w: shape %v", ErrOverflow, e.Size)
	}
	var kept []Chunk
	var vol int64
	seen := map[string]bool{}
	for _, c := range e.Chunks {
		if len(c.Offsets) != nd || len(c.Sizes) != nd {
			return nil, fmt.Errorf("%w: chunk at %v has %d dimensions, the tensor %d", ErrTiling, c.Offsets, len(c.Sizes), nd)
		}
		v := int64(1)
		for d := range nd {
			o, s := c.Offsets[d], c.Sizes[d]
			if o < 0 || s < 0 || o > e.Size[d] || s > e.Size[d]-o {
				return nil, fmt.Errorf("%w: chunk at %v of size %v reaches outside the shape %v", ErrTiling, c.Offsets, c.Sizes, e.Size)
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
			return nil, fmt.Errorf("%w: chunk at %v has no storage entry", ErrMissing, c.Offsets)
		}
		kept = append(kept, c)
		vol += v
		if vol > total {
			break // overlaps; found below
		}
	}
	if err := checkOverlaps(kept, e.Size); err != nil {
		return nil, err
	}
	if vol != total {
		return kept, fmt.Errorf("%w: chunks cover %d of %d elements (a gap)", ErrTiling, vol, total)
	}
	return kept, nil
}

// numel is the element count of shape, false when a dimension is
// negative or the count exceeds 2^62.
func numel(shape []int64) (int64, bool) {
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
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
