package verify

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/ckpt-dev/ckpt/internal/llamacpp"
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
// order), must be equal. A GGUF file of a Llama-family architecture
// (general.architecture llama or qwen2) compared with a checkpoint of
// another format is matched as ckpt convert and llama.cpp's converter
// wrote it: the other side's Hugging Face names mapped to llama.cpp's and,
// for llama, its q/k rows permuted; the report's notes say so.
type Matching struct {
	StripA, StripB   []string
	RenameA, RenameB []Rename
	// NoGGUFNames turns the Llama-family GGUF mapping off.
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
// are what to read (b or a may be a permuted view), shapeA and shapeB the
// shapes to compare.
type pair struct {
	key            string // the matched name
	a, b           *statedict.Tensor
	shapeA, shapeB []int64
	problem        string // why the values cannot be compared ("" when they can)
}

// matched is the result of pairing two checkpoints: pairs[i] is A's tensor
// i (nil when B has none), onlyB B's tensors without a partner.
type matched struct {
	pairs []*pair
	onlyB []*statedict.Tensor
	notes []string
}

// side is one checkpoint as matching sees it: its tensors by matched name,
// and how it maps names.
type side struct {
	ck      *statedict.Checkpoint
	strip   []string
	renames []Rename
	llama   bool   // map Hugging Face names to llama.cpp's
	arch    string // the other side's general.architecture, when llama
	heads   int64  // q/k permutation head counts (0: no permutation)
	headsKV int64
	byKey   map[string]*statedict.Tensor
	aliases map[string]string // alias key -> kept key
	mapped  int               // tensors renamed by the llama map
	permute int               // q/k tensors permuted
}

func (s *side) key(name string) string {
	k := ruleName(name, s.strip, s.renames)
	if s.llama {
		if n, ok := llamacpp.Rename(k); ok {
			k = n
		}
	}
	return k
}

func newSide(ck *statedict.Checkpoint, strip []string, renames []Rename) *side {
	return &side{ck: ck, strip: strip, renames: renames}
}

func (s *side) index() {
	s.byKey = make(map[string]*statedict.Tensor, len(s.ck.Tensors))
	for _, t := range s.ck.Tensors {
		if _, dup := s.byKey[s.key(t.Name)]; !dup {
			s.byKey[s.key(t.Name)] = t
		}
	}
	s.aliases = map[string]string{}
	for alias, kept := range Aliases(s.ck) {
		s.aliases[s.key(alias)] = s.key(kept)
	}
}

func (s *side) lookup(key string) *statedict.Tensor {
	if t, ok := s.byKey[key]; ok {
		return t
	}
	return s.byKey[s.aliases[key]]
}

// ggufArch returns a GGUF checkpoint's general.architecture when the
// Llama map applies to it, and its head counts when q/k are permuted.
func ggufArch(ck *statedict.Checkpoint) (arch string, heads, headsKV int64) {
	if ck.GGUF == nil {
		return "", 0, 0
	}
	kv, ok := ck.GGUF.Get("general.architecture")
	if !ok {
		return "", 0, 0
	}
	arch, _ = kv.Value.(string)
	if !llamacpp.Mapped[arch] || !llamacpp.Permuted[arch] {
		return arch, 0, 0
	}
	num := func(key string) int64 {
		kv, ok := ck.GGUF.Get(arch + "." + key)
		if !ok {
			return 0
		}
		switch v := kv.Value.(type) {
		case uint32:
			return int64(v)
		case int32:
			return int64(v)
		case uint64:
			return int64(min(v, 1<<24))
		case int64:
			return v
		}
		return 0
	}
	heads = num("attention.head_count")
	headsKV = num("attention.head_count_kv")
	if headsKV == 0 {
		headsKV = heads
	}
	return arch, heads, headsKV
}

// llamaSide sets up the Llama-family GGUF mapping on s when other is such
// a GGUF file, s is not GGUF and some of its names are llama.cpp's
// sources.
func llamaSide(s, other *side) {
	if s.ck.GGUF != nil {
		return
	}
	arch, heads, headsKV := ggufArch(other.ck)
	if !llamacpp.Mapped[arch] {
		return
	}
	n := 0
	for _, t := range s.ck.Tensors {
		if _, ok := llamacpp.Rename(ruleName(t.Name, s.strip, s.renames)); ok {
			n++
		}
	}
	if n == 0 {
		return
	}
	s.llama, s.arch, s.heads, s.headsKV = true, arch, heads, headsKV
}

// match pairs the tensors of a and b.
func match(a, b *statedict.Checkpoint, m Matching) *matched {
	sa, sb := newSide(a, m.StripA, m.RenameA), newSide(b, m.StripB, m.RenameB)
	if !m.NoGGUFNames {
		llamaSide(sa, sb)
		llamaSide(sb, sa)
	}
	sa.index()
	sb.index()
	out := &matched{pairs: make([]*pair, len(a.Tensors))}
	usedB := map[*statedict.Tensor]bool{}
	for i, ta := range a.Tensors {
		k := sa.key(ta.Name)
		tb := sb.lookup(k)
		if tb == nil {
			continue
		}
		usedB[tb] = true
		p := &pair{key: k, a: ta, b: tb, shapeA: ta.Shape, shapeB: tb.Shape}
		p.a = sa.permuted(p, ta, k)
		p.b = sb.permuted(p, tb, k)
		out.pairs[i] = p
	}
	for _, tb := range b.Tensors {
		if !usedB[tb] && sa.lookup(sb.key(tb.Name)) == nil {
			out.onlyB = append(out.onlyB, tb)
		}
	}
	for _, s := range []struct {
		s          *side
		name, from string
	}{{sa, "A", "B"}, {sb, "B", "A"}} {
		if !s.s.llama || s.s.mapped == 0 {
			continue
		}
		note := fmt.Sprintf("%s is a GGUF file of architecture %s: %d tensors of %s matched by llama.cpp's names (as ckpt convert writes them)",
			s.from, s.s.arch, s.s.mapped, s.name)
		if s.s.permute > 0 {
			note += fmt.Sprintf(", %d q/k tensors of %s read with llama.cpp's row permutation", s.s.permute, s.name)
		}
		out.notes = append(out.notes, note)
	}
	return out
}

// permuted returns the tensor of this side to read for p: t itself, or
// for the q/k tensors of a Llama-mapped side, its rows in llama.cpp's
// order (a view over its storage). It counts the mapped tensors.
func (s *side) permuted(p *pair, t *statedict.Tensor, key string) *statedict.Tensor {
	if !s.llama {
		return t
	}
	if _, ok := llamacpp.Rename(ruleName(t.Name, s.strip, s.renames)); ok {
		s.mapped++
	}
	mm := llamacpp.QK.FindStringSubmatch(key)
	if mm == nil || s.heads == 0 {
		return t
	}
	heads := s.heads
	if mm[1] == "k" {
		heads = s.headsKV
	}
	shape, strides, err := llamacpp.Permute(t.Shape, t.Strides, heads)
	if err != nil {
		p.problem = err.Error()
		return t
	}
	s.permute++
	v := *t
	v.Shape, v.Strides = shape, strides
	return &v
}

// sameShape reports whether two shapes are equal.
func sameShape(a, b []int64) bool { return slices.Equal(a, b) }
