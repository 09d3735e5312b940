package verify

import (
	"regexp"
	"slices"
	"strings"

	"github.com/ckpt-dev/ckpt/statedict"
)

// Side names one or both of the two checkpoints a comparison reads.
type Side int

// The sides a name rule applies to.
const (
	SideA Side            = 1 << iota // the first checkpoint
	SideB                             // the second checkpoint
	Both  = SideA | SideB             // either checkpoint
)

// Rename is a name rule: every match of Pattern in a name is replaced by
// Replacement (regexp.ReplaceAllString syntax, $1 for groups).
type Rename struct {
	Pattern     *regexp.Regexp
	Replacement string
}

// Matching is how tensors of A and B are paired: each side's names with
// its prefixes stripped (in order, each at most once), then renamed (in
// order), must be equal. A GGUF file of an architecture llama.cpp's
// converter maps (llamacpp.Archs: llama, qwen2, gpt-oss) compared with a
// checkpoint of another format is matched as ckpt convert and llama.cpp's
// converter wrote it: the other side's Hugging Face names mapped to
// llama.cpp's, a tensor llama.cpp splits in two (gpt-oss's gate_up_proj
// and its bias) compared as two pairs (its even and its odd outputs),
// stacked expert weights read in llama.cpp's [experts, out, in] layout,
// and for llama the q/k rows permuted; the report's notes say so.
type Matching struct {
	StripA, StripB   []string
	RenameA, RenameB []Rename
	// NoGGUFNames turns the GGUF mapping off.
	NoGGUFNames bool
}

func (m *Matching) add(side Side, strip string, r *Rename) {
	if side&SideA != 0 {
		if r != nil {
			m.RenameA = append(m.RenameA, *r)
		} else {
			m.StripA = append(m.StripA, strip)
		}
	}
	if side&SideB != 0 {
		if r != nil {
			m.RenameB = append(m.RenameB, *r)
		} else {
			m.StripB = append(m.StripB, strip)
		}
	}
}

func ruleName(name string, strip []string, renames []Rename) string {
	for _, p := range strip {
		name = strings.TrimPrefix(name, p)
	}
	for _, r := range renames {
		name = r.Pattern.ReplaceAllString(name, r.Replacement)
	}
	return name
}

// pair is a tensor of A and the tensor of B it is compared with: a and b
// are what to read (either may be a view of its tensor: q/k rows
// permuted, one half of a split, an expert weight in llama.cpp's
// layout), shapeA and shapeB the shapes to compare.
type pair struct {
	key            string // the matched name
	a, b           *statedict.Tensor
	shapeA, shapeB []int64
	problem        string // why the values cannot be compared ("" when they can)
	// via says how a side was read to pair with a GGUF file's tensor
	// ("even outputs, transposed"); "" when as it is.
	via string
	// widened: the GGUF side's float dtype is wider than the other's and
	// holds its every value (ckpt convert's float32 for a bfloat16 norm),
	// or the other is an MXFP4 weight read as float32 against ggml's
	// MXFP4 reading (which gives +0 for E2M1's -0, transformers -0): verify
	// compares the values exactly rather than the dtypes or bits.
	widened bool
}

// row is one of A's tensors, or one half of a tensor llama.cpp splits,
// and its pair (nil when B has none).
type row struct {
	a    *statedict.Tensor
	part string // "even outputs" or "odd outputs" for a half, else ""
	p    *pair
}

// name is A's tensor's name, and the half when the row is one.
func (r row) name() string {
	if r.part == "" {
		return r.a.Name
	}
	return r.a.Name + " (" + r.part + ")"
}

// matched is the result of pairing two checkpoints: rows are A's tensors
// in order (a split tensor once per half when a half has a partner),
// onlyB B's tensors without a partner.
type matched struct {
	rows  []row
	onlyB []*statedict.Tensor
	notes []string
}

// side is one checkpoint as matching sees it: its tensors by matched name,
// and how it maps names.
type side struct {
	ck      *statedict.Checkpoint
	strip   []string
	renames []Rename
	byKey   map[string]entry
	aliases map[string]string // alias key -> kept key
	gguf    ggufMap
}

// part is one matched name a tensor of a side gives: its whole name, or
// under a GGUF file's map llama.cpp's name or one of its two halves.
type part struct {
	key    string
	parity int  // 0 or 1: a split's even or odd half; -1: whole
	mapped bool // key is llama.cpp's name for the tensor
	expert bool // read in llama.cpp's expert layout (Arch.Transposed)
}

// entry is a tensor of a side under one of its parts.
type entry struct {
	t *statedict.Tensor
	part
}

func newSide(ck *statedict.Checkpoint, strip []string, renames []Rename) *side {
	return &side{ck: ck, strip: strip, renames: renames}
}

// parts returns the matched names of a tensor name.
func (s *side) parts(name string) []part {
	return s.gguf.parts(ruleName(name, s.strip, s.renames))
}

func (s *side) index() {
	s.byKey = make(map[string]entry, len(s.ck.Tensors))
	for _, t := range s.ck.Tensors {
		for _, pt := range s.parts(t.Name) {
			if _, dup := s.byKey[pt.key]; !dup {
				s.byKey[pt.key] = entry{t, pt}
			}
		}
	}
	s.aliases = map[string]string{}
	for alias, kept := range Aliases(s.ck) {
		pa, pk := s.parts(alias), s.parts(kept)
		for i := range min(len(pa), len(pk)) {
			s.aliases[pa[i].key] = pk[i].key
		}
	}
}

func (s *side) lookup(key string) (entry, bool) {
	if e, ok := s.byKey[key]; ok {
		return e, true
	}
	e, ok := s.byKey[s.aliases[key]]
	return e, ok
}

// match pairs the tensors of a and b.
func match(a, b *statedict.Checkpoint, m Matching) *matched {
	sa, sb := newSide(a, m.StripA, m.RenameA), newSide(b, m.StripB, m.RenameB)
	if !m.NoGGUFNames {
		sa.mapTo(sb)
		sb.mapTo(sa)
	}
	sa.index()
	sb.index()
	out := &matched{}
	usedB := map[*statedict.Tensor]bool{}
	for _, ta := range a.Tensors {
		parts := sa.parts(ta.Name)
		rows := make([]row, 0, len(parts))
		for _, pt := range parts {
			r := row{a: ta}
			if len(parts) > 1 {
				r.part = half(pt.parity)
			}
			if eb, ok := sb.lookup(pt.key); ok {
				usedB[eb.t] = true
				r.p = pairOf(sa, sb, entry{ta, pt}, eb)
			}
			rows = append(rows, r)
		}
		if !slices.ContainsFunc(rows, func(r row) bool { return r.p != nil }) {
			rows = []row{{a: ta}} // on A's side only: once, by its own name
		}
		out.rows = append(out.rows, rows...)
	}
	for _, tb := range b.Tensors {
		if usedB[tb] {
			continue
		}
		if !slices.ContainsFunc(sb.parts(tb.Name), func(pt part) bool { _, ok := sa.lookup(pt.key); return ok }) {
			out.onlyB = append(out.onlyB, tb)
		}
	}
	out.notes = append(sa.gguf.note("A", "B"), sb.gguf.note("B", "A")...)
	return out
}

// pairOf makes the pair of ea (a tensor of A under one of its names) and
// eb (B's tensor of that name), each read as its side's map says.
func pairOf(sa, sb *side, ea, eb entry) *pair {
	p := &pair{key: ea.key}
	p.a, p.shapeA = sa.gguf.read(p, ea, eb.t)
	p.b, p.shapeB = sb.gguf.read(p, eb, ea.t)
	switch {
	case sa.gguf.arch != nil && ea.mapped:
		p.widened = p.widened || holdsAll(p.b.DType, p.a.DType)
	case sb.gguf.arch != nil && eb.mapped:
		p.widened = p.widened || holdsAll(p.a.DType, p.b.DType)
	}
	return p
}

// sameShape reports whether two shapes are equal.
func sameShape(a, b []int64) bool { return slices.Equal(a, b) }
