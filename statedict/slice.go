package statedict

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/ckpt-dev/ckpt/dcp"
)

// Range is the half-open interval [Start, Stop) of indices along one
// dimension of a tensor.
type Range struct {
	Start, Stop int64
}

// ErrSlice reports a slice that does not fit its tensor, or a bad split rule.
var ErrSlice = errors.New("statedict: bad slice")

// sliceBox turns ranges (dims beyond len(r) whole) into a box of t.
func sliceBox(t *Tensor, r []Range) (lo, hi []int64, err error) {
	if len(r) > len(t.Shape) {
		return nil, nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: %d ranges for a tensor of %d dimensions", ErrSlice, len(r), len(t.Shape))}
	}
	lo, hi = make([]int64, len(t.Shape)), append([]int64(nil), t.Shape...)
	for d, x := range r {
		if x.Start < 0 || x.Stop < x.Start || x.Stop > t.Shape[d] {
			return nil, nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: range [%d, %d) of dimension %d of size %d", ErrSlice, x.Start, x.Stop, d, t.Shape[d])}
		}
		lo[d], hi[d] = x.Start, x.Stop
	}
	return lo, hi, nil
}

// gatherOf returns the gather t reads from and the box t is of it.
func gatherOf(t *Tensor) (*gather, []int64, error) {
	if t.Storage != nil {
		if g, ok := t.Storage.src.(*gatherSource); ok {
			return g.g, g.lo, nil
		}
	}
	if t.NumEl() < 0 {
		return nil, nil, &Error{Tensor: t.Name, Err: ErrOverflow}
	}
	var once sync.Once
	var ps []*piece
	var perr error
	g := &gather{name: t.Name, dtype: t.DType, shape: t.Shape, pieces: func(_, _ []int64) ([]*piece, error) {
		once.Do(func() {
			p, err := tensorPiece(t)
			if err != nil {
				perr = err
			} else {
				ps = []*piece{p}
			}
		})
		return ps, perr
	}}
	return g, make([]int64, len(t.Shape)), nil
}

// OpenSlice returns the elements of t[r[0].Start:r[0].Stop, r[1]..., ...]
// (dimensions beyond len(r) whole) in C order, little-endian, from any
// format: only the bytes of those elements are read, consecutive ones in
// one read, through buffers of at most 1 MiB per source chunk.
func (t *Tensor) OpenSlice(r ...Range) (io.ReadCloser, error) {
	s, err := t.Slice(r...)
	if err != nil {
		return nil, err
	}
	return s.Open()
}

// Slice returns a tensor standing for t[r...]: same name, dtype, device
// and flags, the slice's shape, contiguous. Nothing is read until its data
// is: Open streams the slice (see OpenSlice), Storage.ReaderAt gives random
// access to it. Slicing a slice or a DCP tensor reads from the original
// chunks.
func (t *Tensor) Slice(r ...Range) (*Tensor, error) {
	if t.Storage == nil || t.Storage.src == nil || t.Layout != Strided && t.Layout != "" || t.Quant != nil {
		return nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: only dense tensors with data can be sliced", ErrUnsupported)}
	}
	lo, hi, err := sliceBox(t, r)
	if err != nil {
		return nil, err
	}
	g, base, err := gatherOf(t)
	if err != nil {
		return nil, err
	}
	for d := range lo {
		lo[d] += base[d]
		hi[d] += base[d]
	}
	shape := make([]int64, len(lo))
	for d := range lo {
		shape[d] = hi[d] - lo[d]
	}
	st := *t.Storage
	st.src = &gatherSource{g: g, lo: lo, hi: hi}
	st.NBytes = boxElems(lo, hi) * int64(t.DType.Size())
	st.BigEndian = false
	st.HasCRC = false
	st.Key = t.Storage.Key + "[" + boxString(lo, hi) + "]"
	out := *t
	out.Shape, out.Strides, out.Offset, out.Storage = shape, contiguousStrides(shape), 0, &st
	return &out, nil
}

func boxString(lo, hi []int64) string {
	parts := make([]string, len(lo))
	for d := range lo {
		parts[d] = fmt.Sprintf("%d:%d", lo[d], hi[d])
	}
	return strings.Join(parts, ",")
}

// ChunkRange is the part of a dimension of size n that rank gets of world,
// as torch.chunk and DTensor's Shard place it: every rank but the last
// non-empty ones gets ceil(n/world) indices, so later ranks may get fewer
// or none (10 over 4: 3, 3, 3, 1; 3 over 4: 1, 1, 1, 0): dcp.ChunkBounds.
func ChunkRange(n int64, rank, world int) Range {
	start, stop := dcp.ChunkBounds(n, rank, world)
	return Range{start, stop}
}

// SplitRule says along which dimension tensors whose names match Pattern
// are split over the ranks of a tensor-parallel group.
type SplitRule struct {
	Pattern   string // path.Match glob over the whole name; '*' also matches dots
	Dim       int    // dimension to split; negative counts from the last
	Replicate bool   // matching tensors are replicated (not split)
}

// ParseSplitRules parses RULE[,RULE...], each RULE PATTERN=DIM or
// PATTERN=replicate, e.g. "*.q_proj.weight=0,*.o_proj.weight=1". PATTERN
// is a glob over the whole tensor name ('*' matches any run of characters,
// dots included; '?' one character; [...] a class). DIM is a dimension
// index, negative counting from the last (-1). The first rule that matches
// a name decides; a tensor no rule matches is replicated.
func ParseSplitRules(s string) ([]SplitRule, error) {
	var rules []SplitRule
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, '=')
		if i <= 0 {
			return nil, fmt.Errorf("%w: split rule %q is not PATTERN=DIM", ErrSlice, part)
		}
		pat, val := strings.TrimSpace(part[:i]), strings.TrimSpace(part[i+1:])
		if _, err := path.Match(pat, ""); err != nil {
			return nil, fmt.Errorf("%w: split rule %q: bad pattern", ErrSlice, part)
		}
		r := SplitRule{Pattern: pat}
		if val == "replicate" || val == "r" {
			r.Replicate = true
		} else {
			d, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("%w: split rule %q: %q is neither a dimension nor \"replicate\"", ErrSlice, part, val)
			}
			r.Dim = d
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// SplitDim returns the dimension of t the rules split it along, or -1 when
// t is replicated. A rule naming a dimension t lacks is an error.
func SplitDim(rules []SplitRule, t *Tensor) (int, error) {
	for _, r := range rules {
		if ok, _ := path.Match(r.Pattern, t.Name); !ok {
			continue
		}
		if r.Replicate {
			return -1, nil
		}
		d := r.Dim
		if d < 0 {
			d += len(t.Shape)
		}
		if d < 0 || d >= len(t.Shape) {
			return 0, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: rule %s=%d names a dimension a tensor of shape %v lacks", ErrSlice, r.Pattern, r.Dim, t.Shape)}
		}
		return d, nil
	}
	return -1, nil
}

// RankCheckpoint returns the part of ck that rank holds in a
// tensor-parallel group of world ranks: each tensor a rule splits is
// replaced by its ChunkRange along the rule's dimension (names unchanged),
// every other tensor is kept whole. Values are kept. The result reads from
// ck lazily and owns nothing: close ck, not it. Its Root is nil, so a .pth
// written from it is a flat state dict.
func RankCheckpoint(ck *Checkpoint, rank, world int, rules []SplitRule) (*Checkpoint, error) {
	if world <= 0 || rank < 0 || rank >= world {
		return nil, fmt.Errorf("%w: rank %d of a world of %d", ErrSlice, rank, world)
	}
	out := *ck
	out.Root = nil
	out.closers = nil
	out.Tensors = make([]*Tensor, 0, len(ck.Tensors))
	out.Storages = nil
	seen := map[*Storage]bool{}
	for _, t := range ck.Tensors {
		d, err := SplitDim(rules, t)
		if err != nil {
			return nil, err
		}
		if d >= 0 && t.Storage != nil {
			r := make([]Range, d+1)
			for i := range d {
				r[i] = Range{0, t.Shape[i]}
			}
			r[d] = ChunkRange(t.Shape[d], rank, world)
			s, err := t.Slice(r...)
			if err != nil {
				return nil, err
			}
			t = s
		}
		out.Tensors = append(out.Tensors, t)
		if t.Storage != nil && !seen[t.Storage] {
			seen[t.Storage] = true
			out.Storages = append(out.Storages, t.Storage)
		}
	}
	return &out, nil
}
