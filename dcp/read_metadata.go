package dcp

import (
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/dcpclass"
	"github.com/ckpt-dev/ckpt/pickle"
)

// ReadOption configures ParseMetadata, Open and NewReader.
type ReadOption func(*readConfig)

type readConfig struct {
	limits      pickle.Limits
	maxMetadata int64
}

func newReadConfig(opts []ReadOption) readConfig {
	c := readConfig{limits: pickle.DefaultLimits(), maxMetadata: 1 << 30}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithPickleLimits bounds the unpickling of .metadata (nesting depth,
// memo, container sizes, operation count) beyond pickle.DefaultLimits.
func WithPickleLimits(l pickle.Limits) ReadOption { return func(c *readConfig) { c.limits = l } }

// WithMaxMetadataSize bounds the .metadata file Open reads into memory
// (default 1 GiB).
func WithMaxMetadataSize(n int64) ReadOption { return func(c *readConfig) { c.maxMetadata = n } }

// rankFile is the name FileSystemWriter gives a rank's file: __R_N.distcp.
// Compiled on first use, not at start-up.
var rankFile = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^__(\d+)_\d+\.distcp$`) })

// RankOf returns the rank that wrote the .distcp file named name
// (__R_N.distcp, FileName's form), -1 when the name does not say.
func RankOf(name string) int {
	if m := rankFile().FindStringSubmatch(name); m != nil {
		if r, err := strconv.Atoi(m[1]); err == nil {
			return r
		}
	}
	return -1
}

// ParseMetadata parses the .metadata pickle of a DCP checkpoint into the
// Metadata that Encode writes: entries in state_dict_metadata order, each
// tensor's chunks as listed with the location storage_data gives them (a
// zero Location where it gives none), each value's location, and the
// paths of planner_data (Planned). Nothing in it is executed; errors are
// pickle's or ErrMalformed. Chunks are not checked against their tensors
// here: see CheckTiling.
func ParseMetadata(data []byte, opts ...ReadOption) (*Metadata, error) {
	cfg := newReadConfig(opts)
	v, err := pickle.Unpickle(data, pickle.WithLimits(cfg.limits),
		pickle.WithPersistentLoad(func(any) (any, error) {
			return nil, fmt.Errorf("%w: a persistent id in DCP metadata", ErrMalformed)
		}))
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
	}
	root, ok := v.(*pickle.Object)
	if !ok || root.Name != dcpclass.MetadataClass {
		return nil, bad("not a torch.distributed.checkpoint Metadata (a %s)", pickle.TypeName(v))
	}
	st := root.State
	sdm, ok := field(st, "state_dict_metadata").(*pickle.Dict)
	if !ok {
		return nil, bad("Metadata has no state_dict_metadata dict")
	}
	type key struct{ fqn, off string }
	storage := map[key]pickle.DictEntry{}
	if sd, ok := field(st, "storage_data").(*pickle.Dict); ok {
		for _, e := range sd.Entries {
			idx, ok := e.Key.(*pickle.Object)
			if !ok || idx.Name != dcpclass.MetadataIndex {
				return nil, bad("storage_data key is a %s, not a MetadataIndex", pickle.TypeName(e.Key))
			}
			fqn, ok := field(idx.State, "fqn").(string)
			if !ok {
				return nil, bad("MetadataIndex without fqn")
			}
			off := ""
			if o := field(idx.State, "offset"); o != nil {
				d, err := ints(o)
				if err != nil {
					return nil, bad("storage_data[%q].offset: %v", fqn, err)
				}
				off = fmt.Sprint(d)
			}
			storage[key{fqn, off}] = e
		}
	} else if field(st, "storage_data") != nil {
		return nil, bad("storage_data is a %s, not a dict", pickle.TypeName(field(st, "storage_data")))
	}
	where := func(fqn, off string) (Location, error) {
		e, ok := storage[key{fqn, off}]
		if !ok {
			return Location{}, nil
		}
		info, ok := e.Value.(*pickle.Object)
		if !ok || info.Name != dcpclass.StorageInfo {
			return Location{}, bad("storage_data[%q] is a %s, not a _StorageInfo", fqn, pickle.TypeName(e.Value))
		}
		file, _ := field(info.State, "relative_path").(string)
		b, ok1 := field(info.State, "offset").(int64)
		l, ok2 := field(info.State, "length").(int64)
		if file == "" || !ok1 || !ok2 {
			return Location{}, bad("storage_data[%q] lacks relative_path, offset or length", fqn)
		}
		return Location{File: file, Offset: b, Length: l}, nil
	}
	md := &Metadata{}
	for _, e := range sdm.Entries {
		name, ok := e.Key.(string)
		if !ok {
			return nil, bad("state_dict_metadata key is a %s, not a str", pickle.TypeName(e.Key))
		}
		o, ok := e.Value.(*pickle.Object)
		if !ok {
			return nil, bad("state_dict_metadata[%q] is a %s", name, pickle.TypeName(e.Value))
		}
		en := Entry{FQN: name}
		switch o.Name {
		case dcpclass.BytesStorage:
			var err error
			if en.Value, err = where(name, ""); err != nil {
				return nil, err
			}
		case dcpclass.TensorStorage:
			en.Tensor = true
			props, ok := field(o.State, "properties").(*pickle.Object)
			if !ok {
				return nil, bad("tensor %q has no TensorProperties", name)
			}
			g, ok := propDType(props)
			if !ok {
				return nil, bad("tensor %q: unknown dtype in %s", name, pickle.TypeName(field(props.State, "dtype")))
			}
			en.DType = g
			en.RequiresGrad = propRequiresGrad(props)
			shape, err := ints(field(o.State, "size"))
			if err != nil {
				return nil, bad("tensor %q: size: %v", name, err)
			}
			en.Size = shape
			chunks, ok := field(o.State, "chunks").(*pickle.List)
			if !ok {
				return nil, bad("tensor %q has no chunk list", name)
			}
			for i, cv := range *chunks {
				co, ok := cv.(*pickle.Object)
				if !ok || co.Name != dcpclass.ChunkStorage {
					return nil, bad("tensor %q chunk %d is a %s", name, i, pickle.TypeName(cv))
				}
				offs, err1 := ints(field(co.State, "offsets"))
				sizes, err2 := ints(field(co.State, "sizes"))
				if err1 != nil || err2 != nil {
					return nil, bad("tensor %q chunk %d: offsets or sizes are not integers", name, i)
				}
				c := Chunk{Offsets: offs, Sizes: sizes}
				if c.Location, err = where(name, fmt.Sprint(offs)); err != nil {
					return nil, err
				}
				en.Chunks = append(en.Chunks, c)
			}
		default:
			return nil, bad("state_dict_metadata[%q] is a %s", name, o.Module+"."+o.Name)
		}
		md.Entries = append(md.Entries, en)
	}
	md.readPlannerData(field(st, "planner_data"))
	return md, nil
}

// field returns a dataclass field from its BUILD state, its __dict__
// (nil when absent).
func field(state any, name string) any {
	d, ok := state.(*pickle.Dict)
	if !ok {
		return nil
	}
	v, _ := d.Get(name)
	return v
}

// ints reads a torch.Size (or a tuple or list) of ints.
func ints(v any) ([]int64, error) {
	var items []any
	switch x := v.(type) {
	case *pickle.Tuple:
		items = *x
	case *pickle.List:
		items = *x
	default:
		return nil, fmt.Errorf("a %s, not a torch.Size", pickle.TypeName(v))
	}
	out := make([]int64, len(items))
	for i, e := range items {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("item %d is a %s, not an int", i, pickle.TypeName(e))
		}
		out[i] = n
	}
	return out, nil
}

// propField reads a TensorProperties field: its state is the tuple
// (dtype, layout, requires_grad, memory_format, pin_memory), or a dict in
// torch versions without __getstate__.
func propField(p *pickle.Object, i int, name string) any {
	switch s := p.State.(type) {
	case *pickle.Tuple:
		if len(*s) > i {
			return (*s)[i]
		}
	case *pickle.Dict:
		v, _ := s.Get(name)
		return v
	}
	return nil
}

// propDType reads TensorProperties' dtype.
func propDType(p *pickle.Object) (dtype.DType, bool) {
	gl, ok := propField(p, 0, "dtype").(pickle.Global)
	if !ok || gl.Module != "torch" {
		return dtype.Invalid, false
	}
	return dtype.Parse(gl.Name)
}

// propRequiresGrad reads TensorProperties' requires_grad (false when it
// is not a bool).
func propRequiresGrad(p *pickle.Object) bool {
	b, _ := propField(p, 2, "requires_grad").(bool)
	return b
}

// readPlannerData sets each entry's Path from planner_data, {fqn: (key,
// key, ...)}, and Planned, unless some entry is not a non-empty tuple of
// strings and ints (indices at most 2^20): then no Path is set.
func (m *Metadata) readPlannerData(v any) {
	d, ok := v.(*pickle.Dict)
	if !ok {
		return
	}
	paths := make(map[string][]any, len(d.Entries))
	for _, e := range d.Entries {
		name, ok := e.Key.(string)
		tp, ok2 := e.Value.(*pickle.Tuple)
		if !ok || !ok2 || len(*tp) == 0 {
			return
		}
		for _, k := range *tp {
			switch x := k.(type) {
			case string:
			case int64:
				if x < 0 || x > 1<<20 {
					return
				}
			default:
				return
			}
		}
		paths[name] = *tp
	}
	for i := range m.Entries {
		m.Entries[i].Path = paths[m.Entries[i].FQN]
	}
	m.Planned = true
}

// Tree rebuilds the nested state dict the default planner flattened, as
// dcp_to_torch_save does: dict keys and list indices from each entry's
// Path (its FQN alone when it has none), lists padded with None, and
// leaves[FQN] at each place (entries without a leaf are left out). It is
// nil (a flat checkpoint) when the metadata was not Planned or its paths
// contradict each other.
func (m *Metadata) Tree(leaves map[string]any) any {
	if !m.Planned {
		return nil
	}
	root := &pickle.Dict{}
	for _, e := range m.Entries {
		v, ok := leaves[e.FQN]
		if !ok {
			continue
		}
		path := e.Path
		if len(path) == 0 {
			path = []any{e.FQN}
		}
		var cur any = root
		for i, k := range path {
			last := i == len(path)-1
			var next any
			if !last {
				if _, isInt := path[i+1].(int64); isInt {
					next = &pickle.List{}
				} else {
					next = &pickle.Dict{}
				}
			} else {
				next = v
			}
			switch c := cur.(type) {
			case *pickle.Dict:
				key, ok := k.(string)
				if !ok {
					return nil
				}
				if old, ok := c.Get(key); ok {
					if last {
						return nil
					}
					next = old
				} else {
					c.Entries = append(c.Entries, pickle.DictEntry{Key: key, Value: next})
				}
			case *pickle.List:
				idx, ok := k.(int64)
				if !ok {
					return nil
				}
				for int64(len(*c)) <= idx {
					*c = append(*c, nil)
				}
				if old := (*c)[idx]; old != nil {
					if last {
						return nil
					}
					next = old
				} else {
					(*c)[idx] = next
				}
			default:
				return nil
			}
			cur = next
		}
	}
	return root
}
