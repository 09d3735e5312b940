package statedict

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

var rankFile = regexp.MustCompile(`^__(\d+)_\d+\.distcp$`)

// DCPItem is one entry of a DCP checkpoint's metadata, joined with its
// storage entries.
type DCPItem struct {
	Name     string
	IsTensor bool
	DType    dtype.DType // tensors
	Shape    []int64     // tensors: the global shape
	Chunks   []Chunk     // tensors, as listed
	// Non-tensor values: where their torch.save lies.
	File          string
	Begin, Length int64
}

// DCPMeta is a parsed .metadata file.
type DCPMeta struct {
	Items []DCPItem
	// Paths is the planner_data of the default planner: for each flattened
	// name, the keys of its place in the saved state dict (strings for
	// dict keys, int64 for list indices). nil when the metadata has none.
	Paths map[string][]any
}

// ParseDCPMetadata parses the .metadata pickle of a DCP checkpoint (only
// WithPickleLimits among the options applies). Nothing in it is executed.
func ParseDCPMetadata(data []byte, opts ...Option) (*DCPMeta, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	v, err := pickle.Unpickle(data, pickle.WithLimits(cfg.limits),
		pickle.WithPersistentLoad(func(any) (any, error) {
			return nil, fmt.Errorf("%w: a persistent id in DCP metadata", ErrMalformed)
		}))
	if err != nil {
		return nil, pickleError(DCPMetadata, err)
	}
	bad := func(format string, args ...any) error {
		return &Error{Record: DCPMetadata, Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
	}
	root, ok := v.(*pickle.Object)
	if !ok || root.Name != "Metadata" {
		return nil, bad("not a torch.distributed.checkpoint Metadata (a %s)", TypeName(v))
	}
	st := objState(root)
	sdm, ok := field(st, "state_dict_metadata").(*pickle.Dict)
	if !ok {
		return nil, bad("Metadata has no state_dict_metadata dict")
	}
	type key struct{ fqn, off string }
	storage := map[key]pickle.DictEntry{}
	if sd, ok := field(st, "storage_data").(*pickle.Dict); ok {
		for _, e := range sd.Entries {
			idx, ok := e.Key.(*pickle.Object)
			if !ok || idx.Name != "MetadataIndex" {
				return nil, bad("storage_data key is a %s, not a MetadataIndex", TypeName(e.Key))
			}
			is := objState(idx)
			fqn, ok := field(is, "fqn").(string)
			if !ok {
				return nil, bad("MetadataIndex without fqn")
			}
			off := ""
			if o := field(is, "offset"); o != nil {
				d, err := ints(o)
				if err != nil {
					return nil, bad("storage_data[%q].offset: %v", fqn, err)
				}
				off = fmt.Sprint(d)
			}
			storage[key{fqn, off}] = e
		}
	} else if field(st, "storage_data") != nil {
		return nil, bad("storage_data is a %s, not a dict", TypeName(field(st, "storage_data")))
	}
	where := func(fqn, off string) (file string, begin, length int64, err error) {
		e, ok := storage[key{fqn, off}]
		if !ok {
			return "", 0, 0, nil
		}
		info, ok := e.Value.(*pickle.Object)
		if !ok || info.Name != "_StorageInfo" {
			return "", 0, 0, bad("storage_data[%q] is a %s, not a _StorageInfo", fqn, TypeName(e.Value))
		}
		is := objState(info)
		file, _ = field(is, "relative_path").(string)
		b, ok1 := field(is, "offset").(int64)
		l, ok2 := field(is, "length").(int64)
		if file == "" || !ok1 || !ok2 {
			return "", 0, 0, bad("storage_data[%q] lacks relative_path, offset or length", fqn)
		}
		return file, b, l, nil
	}
	md := &DCPMeta{}
	for _, e := range sdm.Entries {
		name, ok := e.Key.(string)
		if !ok {
			return nil, bad("state_dict_metadata key is a %s, not a str", TypeName(e.Key))
		}
		o, ok := e.Value.(*pickle.Object)
		if !ok {
			return nil, bad("state_dict_metadata[%q] is a %s", name, TypeName(e.Value))
		}
		it := DCPItem{Name: name}
		switch o.Name {
		case "BytesStorageMetadata":
			var err error
			if it.File, it.Begin, it.Length, err = where(name, ""); err != nil {
				return nil, err
			}
		case "TensorStorageMetadata":
			it.IsTensor = true
			ts := objState(o)
			props, ok := field(ts, "properties").(*pickle.Object)
			if !ok {
				return nil, bad("tensor %q has no TensorProperties", name)
			}
			g, ok := propDType(props)
			if !ok {
				return nil, bad("tensor %q: unknown dtype in %s", name, TypeName(field(objState(props), "dtype")))
			}
			it.DType = g
			shape, err := ints(field(ts, "size"))
			if err != nil {
				return nil, bad("tensor %q: size: %v", name, err)
			}
			it.Shape = shape
			chunks, ok := field(ts, "chunks").(*pickle.List)
			if !ok {
				return nil, bad("tensor %q has no chunk list", name)
			}
			for i, cv := range *chunks {
				co, ok := cv.(*pickle.Object)
				if !ok || co.Name != "ChunkStorageMetadata" {
					return nil, bad("tensor %q chunk %d is a %s", name, i, TypeName(cv))
				}
				cs := objState(co)
				offs, err1 := ints(field(cs, "offsets"))
				sizes, err2 := ints(field(cs, "sizes"))
				if err1 != nil || err2 != nil {
					return nil, bad("tensor %q chunk %d: offsets or sizes are not integers", name, i)
				}
				c := Chunk{Offsets: offs, Sizes: sizes, Rank: -1}
				if c.File, c.Begin, c.Length, err = where(name, fmt.Sprint(offs)); err != nil {
					return nil, err
				}
				if m := rankFile.FindStringSubmatch(c.File); m != nil {
					if r, err := strconv.Atoi(m[1]); err == nil {
						c.Rank = r
					}
				}
				it.Chunks = append(it.Chunks, c)
			}
		default:
			return nil, bad("state_dict_metadata[%q] is a %s", name, o.Module+"."+o.Name)
		}
		md.Items = append(md.Items, it)
	}
	md.Paths = plannerPaths(field(st, "planner_data"))
	return md, nil
}

// objState is the BUILD state of a dataclass instance: its __dict__.
func objState(o *pickle.Object) any { return o.State }

// field returns a dataclass field from a state dict (nil when absent).
func field(state any, name string) any {
	d, ok := state.(*pickle.Dict)
	if !ok {
		return nil
	}
	v, _ := d.Get(name)
	return v
}

// ints reads a torch.Size (or a tuple or list) of non-negative-or-not ints.
func ints(v any) ([]int64, error) {
	var items []any
	switch x := v.(type) {
	case *pickle.Tuple:
		items = *x
	case *pickle.List:
		items = *x
	default:
		return nil, fmt.Errorf("a %s, not a torch.Size", TypeName(v))
	}
	out := make([]int64, len(items))
	for i, e := range items {
		n, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("item %d is a %s, not an int", i, TypeName(e))
		}
		out[i] = n
	}
	return out, nil
}

// propDType reads TensorProperties' dtype: its state is the tuple
// (dtype, layout, requires_grad, memory_format, pin_memory), or a dict in
// torch versions without __getstate__.
func propDType(p *pickle.Object) (dtype.DType, bool) {
	var g any
	switch s := p.State.(type) {
	case *pickle.Tuple:
		if len(*s) > 0 {
			g = (*s)[0]
		}
	case *pickle.Dict:
		g, _ = s.Get("dtype")
	}
	gl, ok := g.(pickle.Global)
	if !ok || gl.Module != "torch" {
		return dtype.Invalid, false
	}
	return dtype.Parse(gl.Name)
}

// plannerPaths reads planner_data: {fqn: (key, key, ...)}; nil unless every
// entry is a tuple of strings and ints.
func plannerPaths(v any) map[string][]any {
	d, ok := v.(*pickle.Dict)
	if !ok {
		return nil
	}
	out := make(map[string][]any, len(d.Entries))
	for _, e := range d.Entries {
		name, ok := e.Key.(string)
		tp, ok2 := e.Value.(*pickle.Tuple)
		if !ok || !ok2 || len(*tp) == 0 {
			return nil
		}
		for _, k := range *tp {
			switch x := k.(type) {
			case string:
			case int64:
				if x < 0 || x > 1<<20 {
					return nil
				}
			default:
				return nil
			}
		}
		out[name] = *tp
	}
	return out
}
