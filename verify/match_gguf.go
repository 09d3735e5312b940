package verify

import (
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/llamacpp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// ggufMap is how one side (a Hugging Face checkpoint) is matched with a
// GGUF file ckpt convert wrote from it: llama.cpp's map for the file's
// general.architecture (llamacpp.Archs), applied as convert applied it.
// The zero value maps nothing.
type ggufMap struct {
	arch           *llamacpp.Arch // nil: names as they are
	heads, headsKV int64          // q/k permutation head counts (0: no permutation)
	// The side's tensors paired through the map: renamed or split, split
	// in two, read as llama.cpp's expert layout, MXFP4 ones of those read
	// as float32, q/k rows permuted.
	mapped, split, expert, widened, permute tensorSet
}

// tensorSet counts tensors once each.
type tensorSet map[*statedict.Tensor]bool

func (s *tensorSet) add(t *statedict.Tensor) {
	if *s == nil {
		*s = tensorSet{}
	}
	(*s)[t] = true
}

// ggufArch returns the llama.cpp map of a GGUF checkpoint's
// general.architecture (nil when Archs has none, or ck is not GGUF) and
// its head counts when q/k rows are permuted.
func ggufArch(ck *statedict.Checkpoint) (arch *llamacpp.Arch, heads, headsKV int64) {
	if ck.GGUF == nil {
		return nil, 0, 0
	}
	kv, ok := ck.GGUF.Get("general.architecture")
	if !ok {
		return nil, 0, 0
	}
	name, _ := kv.Value.(string)
	arch = llamacpp.Archs[name]
	if arch == nil || !arch.Permute {
		return arch, 0, 0
	}
	num := func(key string) int64 {
		kv, ok := ck.GGUF.Get(name + "." + key)
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

// mapTo sets up llama.cpp's map on s when other is a GGUF file of a mapped
// architecture, s is not GGUF and some of its names are llama.cpp's
// sources.
func (s *side) mapTo(other *side) {
	if s.ck.GGUF != nil {
		return
	}
	arch, heads, headsKV := ggufArch(other.ck)
	if arch == nil {
		return
	}
	m := ggufMap{arch: arch, heads: heads, headsKV: headsKV}
	for _, t := range s.ck.Tensors {
		if pt := m.parts(ruleName(t.Name, s.strip, s.renames)); pt[0].mapped {
			s.gguf = m
			return
		}
	}
}

// parts returns the matched names of a name after the side's own rules:
// itself, llama.cpp's name for it, or the names of its two halves.
func (m *ggufMap) parts(k string) []part {
	a := m.arch
	if a == nil {
		return []part{{key: k, parity: -1}}
	}
	transposed := func(n string) bool { return a.Transposed() != nil && a.Transposed().MatchString(n) }
	if even, odd, ok := a.SplitOf(k); ok {
		return []part{{even, 0, true, transposed(even)}, {odd, 1, true, transposed(odd)}}
	}
	if n, ok := a.Rename(k); ok {
		return []part{{n, -1, true, transposed(n)}}
	}
	return []part{{key: k, parity: -1}}
}

// half names the half of a split a parity is ("" for the whole tensor).
func half(parity int) string {
	switch parity {
	case 0:
		return "even outputs"
	case 1:
		return "odd outputs"
	}
	return ""
}

// read returns what to read of e's tensor for p, and the shape to compare:
// the tensor itself, or as convert wrote it from it (one half of a split,
// an expert weight in llama.cpp's layout, q/k rows in llama.cpp's order),
// a view of its storage or one read an expert at a time (expertTensor).
// An MXFP4 expert weight paired with a float32 tensor (a GGUF file's
// MXFP4 blocks, as ckpt reads them) is read as float32: both then decode
// the same blocks to the same bits (every MXFP4 value is exact in
// bfloat16 and in float32). It counts what it maps for the notes.
func (m *ggufMap) read(p *pair, e entry, other *statedict.Tensor) (*statedict.Tensor, []int64) {
	t := e.t
	if m.arch == nil {
		return t, t.Shape
	}
	if e.mapped {
		m.mapped.add(t)
	}
	if e.parity >= 0 {
		m.split.add(t)
	}
	switch {
	case e.expert:
		widen := t.QuantStored != nil && t.QuantStored.Method == "mxfp4" && t.DType == dtype.BFloat16 && other.DType == dtype.Float32
		v, err := expertTensor(t, e.parity, widen)
		if err != nil {
			p.problem = err.Error()
			return t, t.Shape
		}
		m.expert.add(t)
		p.via = strings.TrimPrefix(half(e.parity)+", transposed", ", ")
		if widen {
			m.widened.add(t)
			p.via += ", MXFP4 decoded as float32"
			p.widened = true
		}
		return v, v.Shape
	case e.parity >= 0:
		shape, strides, off, err := llamacpp.HalfView(t.Shape, t.Strides, e.parity)
		if err != nil {
			p.problem = err.Error()
			return t, t.Shape
		}
		p.via = half(e.parity)
		v := *t
		v.Shape, v.Strides, v.Offset = shape, strides, t.Offset+off
		return &v, shape
	}
	mm := llamacpp.QK().FindStringSubmatch(e.key)
	if mm == nil || m.heads == 0 {
		return t, t.Shape
	}
	heads := m.heads
	if mm[1] == "k" {
		heads = m.headsKV
	}
	shape, strides, err := llamacpp.Permute(t.Shape, t.Strides, heads)
	if err != nil {
		p.problem = err.Error()
		return t, t.Shape
	}
	m.permute.add(t)
	p.via = "rows in llama.cpp's q/k order"
	v := *t
	v.Shape, v.Strides = shape, strides
	return &v, t.Shape
}

// note says what the map did to this side (name), matched with the GGUF
// file (from); none when it mapped nothing.
func (m *ggufMap) note(name, from string) []string {
	if m.arch == nil || len(m.mapped) == 0 {
		return nil
	}
	note := fmt.Sprintf("%s is a GGUF file of architecture %s: %d tensors of %s matched by llama.cpp's names (as ckpt convert writes them)",
		from, m.arch.Name, len(m.mapped), name)
	if n := len(m.split); n > 0 {
		note += fmt.Sprintf(", %d split into gate/up halves (even and odd outputs, each compared as its own pair)", n)
	}
	if n := len(m.expert); n > 0 {
		note += fmt.Sprintf(", %d expert weights read transposed (transformers' [experts, in, out] as llama.cpp's [experts, out, in])", n)
	}
	if n := len(m.widened); n > 0 {
		note += fmt.Sprintf(", %d of them MXFP4 decoded as float32 as the GGUF file's are (exact)", n)
	}
	if n := len(m.permute); n > 0 {
		note += fmt.Sprintf(", %d q/k tensors of %s read with llama.cpp's row permutation", n, name)
	}
	return []string{note}
}

// holdsAll reports whether to is a wider float dtype than from that holds
// its every value (ckpt convert writes a GGUF file's norms and biases as
// F32 whatever their dtype).
func holdsAll(to, from dtype.DType) bool {
	switch {
	case to == dtype.Float32:
		return from == dtype.BFloat16 || from == dtype.Float16
	case to == dtype.Float64:
		return from == dtype.Float32 || from == dtype.BFloat16 || from == dtype.Float16
	}
	return false
}
