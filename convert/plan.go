package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/safetensors"
	"github.com/ckpt-dev/ckpt/statedict"
	"github.com/ckpt-dev/ckpt/verify"
)

// Dropped is something of the input the output does not carry.
type Dropped struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// item is one tensor to write.
type item struct {
	name  string            // output name
	src   *statedict.Tensor // source tensor
	dtype dtype.DType       // output dtype (src.DType or the cast target)
	path  []any             // DCP: its planner_data path (nestDCP); nil: (name,)
	pos   int               // DCP: its place in torch's order of the input's leaves (nestDCP)
}

// nbytes is the item's size in the output, contiguous.
func (it *item) nbytes() int64 { return it.src.NumEl() * int64(it.dtype.Size()) }

// value is a kept non-tensor value.
type value struct {
	name string
	v    any
	src  string // its name in the input
	path []any  // DCP: its planner_data path (nestDCP); nil: (name,)
	pos  int    // DCP: its place in torch's order of the input's leaves (nestDCP)
	// DCP: the tensors of a value torch saves whole (a tuple of tensors):
	// v holds them as tensors[i]'s dcp.TensorSpec.Ref(i) (tensorValue).
	tensors []*item
}

// plan is everything decided before a byte is written.
type plan struct {
	items   []*item           // tensors to write, in source order
	aliases map[string]string // safetensors: dropped alias -> kept name
	values  []value           // non-tensor values kept
	dropped []Dropped
	cast    map[*statedict.Storage]bool // storages cast to cfg.dtype
	tree    *tree                       // .pth: the object tree to write; nil for a flat state dict
}

// newName applies prefix stripping and renames.
func (c *config) newName(name string) string {
	for _, p := range c.strip {
		name = strings.TrimPrefix(name, p)
	}
	for _, r := range c.renames {
		name = r.Pattern.ReplaceAllString(name, r.Replacement)
	}
	return name
}

func (c *config) selected(name string) bool {
	if len(c.only) == 0 {
		return true
	}
	for _, g := range c.only {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// isStepCounter reports whether t is an optimizer step counter: one
// element named "....state.<k>.step".
func isStepCounter(t *statedict.Tensor) bool {
	parts := strings.Split(t.Name, ".")
	n := len(parts)
	return t.NumEl() == 1 && n >= 3 && parts[n-1] == "step" && parts[n-3] == "state"
}

// castStorages decides which storages are cast: floating ones of another
// dtype than the target that no step counter views.
func castStorages(ck *statedict.Checkpoint, to dtype.DType) map[*statedict.Storage]bool {
	cast := map[*statedict.Storage]bool{}
	if to == dtype.Invalid {
		return cast
	}
	keep := map[*statedict.Storage]bool{}
	for _, t := range ck.Tensors {
		s := t.Storage
		if s == nil {
			continue
		}
		if isStepCounter(t) || t.DType != s.DType {
			keep[s] = true
		}
		if s.DType.IsFloat() && s.DType != to && s.DType != dtype.Float8E8M0FNU {
			cast[s] = true
		}
	}
	for s := range keep {
		delete(cast, s)
	}
	return cast
}

// DefaultMaxMaterialized is the floor of the default bound on what a
// safetensors output may hold (WithMaxMaterialized): the larger of 1 GiB
// and MaterializedFactor times the bytes of the input's storages.
const DefaultMaxMaterialized = 1 << 30

// MaterializedFactor is the multiple of the input's storage bytes that a
// safetensors output may hold by default (see WithMaxMaterialized). Casts
// grow data at most 8x (float8 to float64); only overlapping views (stride
// 0, as left by expand) grow it further.
const MaterializedFactor = 64

// materializedLimit is the bound on a safetensors output's tensor bytes
// and how it was set, for the error.
func (c *config) materializedLimit(ck *statedict.Checkpoint) (int64, string) {
	if c.maxMaterialized > 0 {
		return c.maxMaterialized, "as set"
	}
	var in int64
	for _, s := range ck.Storages {
		if s.NBytes > 0 {
			in = min(in+s.NBytes, math.MaxInt64/MaterializedFactor)
		}
	}
	return max(DefaultMaxMaterialized, MaterializedFactor*in), fmt.Sprintf("the default: %dx the input's %s of storage, at least 1 GiB", MaterializedFactor, sizeText(in))
}

// checkMaterialized refuses, before anything is written, a safetensors
// output whose tensors hold more bytes than the limit: safetensors copies
// every view out contiguous, so a broadcast view of shape (2^40,) over one
// element would write 4 TiB. The error names the tensor that grows most.
func (c *config) checkMaterialized(ck *statedict.Checkpoint, items []*item) error {
	limit, how := c.materializedLimit(ck)
	var total, grow int64
	var worst *item
	for _, it := range items {
		n := it.nbytesSat()
		total = min(total, math.MaxInt64-n) + n
		if g := n - it.src.Storage.NBytes; worst == nil || g > grow {
			worst, grow = it, g
		}
	}
	if total <= limit || worst == nil {
		return nil
	}
	t := worst.src
	return &TensorError{Name: t.Name, Err: fmt.Errorf("%w: the safetensors output would hold %s of tensor data, more than the limit of %s (%s); this %s tensor of shape %s and strides %s views %s of storage and alone becomes %s copied out contiguous; raise the limit with --max-materialized (convert.WithMaxMaterialized), leave the tensor out with --only, or write .pth, which keeps views",
		ErrTooLarge, sizeText(total), sizeText(limit), how, t.DType, intsText(t.Shape), intsText(t.Strides), sizeText(t.Storage.NBytes), sizeText(worst.nbytesSat()))}
}

// nbytesSat is nbytes, saturating at math.MaxInt64.
func (it *item) nbytesSat() int64 {
	n, sz := it.src.NumEl(), int64(it.dtype.Size())
	if n > 0 && n > math.MaxInt64/sz {
		return math.MaxInt64
	}
	return n * sz
}

// sizeText writes n bytes for people: "4 B", "1.5 GiB".
func sizeText(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), ""
	for _, u = range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		v /= 1024
		if v < 1024 {
			break
		}
	}
	return fmt.Sprintf("%.1f %s", v, u)
}

// intsText writes a shape or strides as Python does: [2, 3].
func intsText(v []int64) string {
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, x, 10)
	}
	return string(append(b, ']'))
}

// knownSafetensors reports whether package safetensors can write code.
func knownSafetensors(code string) bool {
	_, ok := safetensors.ElementBits(code)
	return ok
}

// makePlan selects, renames and classifies everything; it fails on name
// collisions before anything is written.
// For .pth output it writes the source's object tree when it can (see
// useTree and treePlan), and a flat state dict otherwise.
func makePlan(ck *statedict.Checkpoint, c *config, f Format) (*plan, error) {
	fo := outputs[f]
	// torch.load refuses a file with an invalid sparse tensor; so does
	// convert, though it drops sparse tensors from its output.
	for _, t := range ck.Tensors {
		if t.Layout != "" && t.Layout != statedict.Strided && c.selected(t.Name) {
			if err := t.Validate(); err != nil {
				return nil, err
			}
		}
		if err := checkScaleCast(t, c); err != nil {
			return nil, err
		}
		if d := t.DTensor; d != nil && !d.Whole(t.Shape) && c.selected(t.Name) {
			return nil, &TensorError{Name: t.Name, Err: fmt.Errorf("%w: shard %v of %s (rank coordinate %v); "+
				"save the model with torch.distributed.checkpoint (DCP) and convert that directory, which ckpt assembles",
				ErrPartialShard, t.Shape, d, d.Coordinate)}
		}
	}
	if c.useTree(ck, f) {
		if p, err := treePlan(ck, c); err != nil || p != nil {
			return p, err
		}
	}
	p := &plan{aliases: map[string]string{}, cast: castStorages(ck, c.dtype)}
	for s := range c.quantKeep { // quantized codes and scales are never cast
		delete(p.cast, s)
	}
	sources := map[string]string{} // output name -> source name
	claim := func(out, src string) error {
		if prev, ok := sources[out]; ok {
			return &TensorError{Name: out, Err: fmt.Errorf("%w: %q and %q both become %q", ErrCollision, prev, src, out)}
		}
		sources[out] = src
		return nil
	}
	for _, t := range ck.Tensors {
		if !c.selected(t.Name) {
			continue
		}
		if why := fo.unsupported(t); why != "" {
			p.dropped = append(p.dropped, Dropped{Name: t.Name, Type: "tensor", Reason: why})
			continue
		}
		if t.Attribute && !c.attributes {
			p.dropped = append(p.dropped, Dropped{Name: t.Name, Type: "tensor",
				Reason: "TorchScript attribute, not in state_dict() (--attributes writes it)"})
			continue
		}
		it := &item{name: c.newName(t.Name), src: t, dtype: t.DType}
		if p.cast[t.Storage] {
			it.dtype = c.dtype
		}
		if err := claim(it.name, t.Name); err != nil {
			return nil, err
		}
		p.items = append(p.items, it)
	}
	if fo.aliases() == aliasRestore {
		if err := p.restoreAliases(ck, c, claim); err != nil {
			return nil, err
		}
	}
	for _, o := range slices.Concat(ck.Objects, storedObjects(ck)) {
		if !c.selected(o.Name) {
			continue
		}
		v, why := fo.value(o.Value, c.dropFloats)
		if why != "" {
			p.dropped = append(p.dropped, Dropped{Name: o.Name, Type: o.Type, Reason: why})
			continue
		}
		name := c.newName(o.Name)
		if err := claim(name, o.Name); err != nil {
			return nil, err
		}
		p.values = append(p.values, value{name: name, v: v, src: o.Name})
	}
	for _, group := range [][]statedict.Object{ck.Opaque, ck.Foreign} {
		for _, o := range group {
			if c.selected(o.Name) {
				p.dropped = append(p.dropped, Dropped{Name: o.Name, Type: o.Type, Reason: "not a plain value; never executed"})
			}
		}
	}
	if len(p.items) == 0 {
		if len(p.dropped) > 0 {
			d := p.dropped[0]
			return nil, fmt.Errorf("%w: %d tensors and values dropped, e.g. %q: %s", ErrNothing, len(p.dropped), d.Name, d.Reason)
		}
		return nil, ErrNothing
	}
	if fo.aliases() == aliasDedupe {
		p.dedupe()
	}
	return p, nil
}

// dedupe drops tensors identical to another (same storage, dtype, offset,
// shape, strides): the first name in sorted order is kept and the others
// are recorded as aliases.
func (p *plan) dedupe() {
	type key struct {
		s      *statedict.Storage
		dtype  dtype.DType
		offset int64
		shape  string
	}
	groups := map[key][]*item{}
	for _, it := range p.items {
		t := it.src
		k := key{t.Storage, t.DType, t.Offset, fmt.Sprint(t.Shape, t.Strides)}
		groups[k] = append(groups[k], it)
	}
	drop := map[*item]bool{}
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		sort.Slice(g, func(i, j int) bool { return g[i].name < g[j].name })
		for _, it := range g[1:] {
			p.aliases[it.name] = g[0].name
			drop[it] = true
		}
	}
	p.items = slices.DeleteFunc(p.items, func(it *item) bool { return drop[it] })
}

// restoreAliases re-creates, for .pth output, the tied tensors a
// safetensors conversion dropped and recorded in __metadata__: each alias
// becomes a tensor over the kept tensor's storage again.
func (p *plan) restoreAliases(ck *statedict.Checkpoint, c *config, claim func(out, src string) error) error {
	byName := map[string]*item{}
	for _, it := range p.items {
		byName[it.src.Name] = it
	}
	aliases := verify.Aliases(ck)
	for _, alias := range sortedNames(aliases) {
		kept, ok := byName[aliases[alias]]
		if !ok || !c.selected(alias) {
			continue
		}
		it := &item{name: c.newName(alias), src: kept.src, dtype: kept.dtype}
		if err := claim(it.name, alias); err != nil {
			return err
		}
		p.items = append(p.items, it)
	}
	return nil
}

// storedObjects returns the non-tensor values a conversion to safetensors
// recorded under ObjectsKey; unreadable entries are ignored (they are
// metadata, not data).
func storedObjects(ck *statedict.Checkpoint) []statedict.Object {
	s, ok := ck.Metadata[ObjectsKey]
	if !ok {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	var out []statedict.Object
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		typ := "str"
		switch x := v.(type) {
		case nil:
			typ = "NoneType"
		case bool:
			typ = "bool"
		case json.Number:
			if i, err := x.Int64(); err == nil {
				v, typ = i, "int"
			} else if f, err := x.Float64(); err == nil {
				v, typ = f, "float"
			}
		case string:
		default:
			typ = fmt.Sprintf("%T", v)
		}
		out = append(out, statedict.Object{Name: name, Type: typ, Value: v})
	}
	return out
}
