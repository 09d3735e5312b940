package pickle

import (
	"context"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/nlpodyssey/gopickle/types"
)

// Tuple is a Python tuple (also torch.Size).
type Tuple []any

// List is a Python list.
type List []any

// Dict is a Python dict or one of the dict classes ckpt knows
// (collections.OrderedDict, Counter, defaultdict). Entries keep insertion
// order; a key stored twice keeps its first position and its last value, as
// in Python, for keys of scalar types (strings up to 1 KiB, ints, floats,
// bools, bytes, None) and by identity for other values.
type Dict struct {
	Class   string // "" for a plain dict, else "collections.OrderedDict", ...
	Entries []DictEntry
	State   any // BUILD state, e.g. {'_metadata': ...} on a torch state dict; nil if none
}

// DictEntry is one key/value pair of a Dict.
type DictEntry struct {
	Key, Value any
}

// Get returns the value stored under key, comparing keys as Dict does when
// it removes duplicates.
func (d *Dict) Get(key any) (any, bool) {
	k, ok := hashKey(key)
	if !ok {
		return nil, false
	}
	for _, e := range d.Entries {
		if ek, ok := hashKey(e.Key); ok && ek == k {
			return e.Value, true
		}
	}
	return nil, false
}

// Set is a Python set or frozenset, in stream order without duplicates.
type Set struct {
	Items  []any
	Frozen bool
}

// Global is a harmless global used as a value: a dtype (torch.float32), a
// layout, a qscheme, a storage class, a builtin type, a known function.
type Global struct {
	Module, Name string
}

// String returns module.name.
func (g Global) String() string { return g.Module + "." + g.Name }

// Device is a torch.device: torch.device("cuda", 1) is "cuda:1".
type Device string

// Object is an instance of a benign class ckpt knows (argparse.Namespace,
// numpy arrays, dtypes and scalars, datetime, pathlib, ...). Nothing is
// instantiated: Args are the constructor arguments (nil when the class
// itself was used as a value), State the BUILD state (the last one when
// there are several), DictItems and
// ListItems what SETITEM(S) and APPEND(S) added. NEWOBJ_EX's keyword
// arguments arrive as a final *Dict argument.
type Object struct {
	Module, Name string
	Args         []any
	State        any
	DictItems    []DictEntry
	ListItems    []any
}

// Foreign is a placeholder for a global ckpt does not know and never calls
// (a model class, an optimizer class, a user type). Fields are as in Object.
type Foreign struct {
	Module, Name string
	Args         []any
	State        any
	DictItems    []DictEntry
	ListItems    []any
}

// machine connects gopickle's hooks to the validated program.
type machine struct {
	cfg  *config
	prog *program
	conv *converter
}

// findClass returns the global the validating pass resolved for the
// rewritten module name "\x00<index>" ("\x00F" is the frozenset marker).
func (m *machine) findClass(module, _ string) (any, error) {
	if module == "\x00F" {
		return m.prog.fsMark, nil
	}
	i, err := strconv.Atoi(strings.TrimPrefix(module, "\x00"))
	if err != nil || i < 0 || i >= len(m.prog.globals) {
		return nil, malformed("unresolved global %q", module)
	}
	return m.prog.globals[i], nil
}

// persistentLoad handles BINPERSID/PERSID: the rewritten FROZENSET, the
// class of a legacy pickled module, or a real persistent id handed
// (converted) to the caller's hook.
func (m *machine) persistentLoad(pid any) (any, error) {
	if t, ok := pid.(*types.Tuple); ok && len(*t) == 2 {
		if mark, ok := (*t)[1].(*frozenMark); ok && mark == m.prog.fsMark {
			s := &pySet{frozen: true}
			if items, ok := (*t)[0].(*types.Tuple); ok {
				s.items = *items
			}
			return s, nil
		}
	}
	// ('module', cls, source_file, source): the id torch's legacy writer
	// gives the class of a pickled nn.Module. torch's loader returns the
	// class (after comparing the source, which ckpt does not run); so does
	// this one, unconverted, so that NEWOBJ can record an instance of it.
	// torch < 0.3's tar format wrote (cls, source_file, source).
	if t, ok := pid.(*types.Tuple); ok {
		if len(*t) == 4 {
			if s, ok := (*t)[0].(string); ok && s == "module" {
				if c, ok := (*t)[1].(*pyClass); ok {
					return c, nil
				}
				return nil, malformed("module persistent id does not name a class")
			}
		}
		if len(*t) == 3 {
			if c, ok := (*t)[0].(*pyClass); ok {
				return c, nil
			}
		}
	}
	p, err := m.conv.value(pid, 0)
	if err != nil {
		return nil, err
	}
	v, err := m.cfg.persistentLoad(p)
	if err != nil {
		return nil, &userError{err}
	}
	return v, nil
}

// ---- small callables of the standard library ----

// dictMaker is OrderedDict(), OrderedDict(pairs), OrderedDict(mapping),
// Counter(mapping) and the like.
func dictMaker(class string) hookFunc {
	return func(rt *hookEnv, args []any) (any, error) {
		if err := arity(class, args, 0, 1); err != nil {
			return nil, err
		}
		d := &pyDict{class: class}
		if len(args) == 0 || args[0] == nil {
			return d, nil
		}
		entries, err := entriesOf(class, args[0])
		if err != nil {
			return nil, err
		}
		if err := rt.charge(len(entries)); err != nil {
			return nil, err
		}
		d.entries = append([]DictEntry(nil), entries...)
		return d, nil
	}
}

// entriesOf reads a mapping or a sequence of pairs.
func entriesOf(what string, v any) ([]DictEntry, error) {
	switch x := v.(type) {
	case *types.Dict:
		out := make([]DictEntry, len(*x))
		for i, e := range *x {
			out[i] = DictEntry{e.Key, e.Value}
		}
		return out, nil
	case *pyDict:
		return x.entries, nil
	}
	items, ok := seq(v)
	if !ok {
		return nil, malformed("%s argument is %T", what, v)
	}
	out := make([]DictEntry, len(items))
	for i, it := range items {
		kv, ok := seq(it)
		if !ok || len(kv) != 2 {
			return nil, malformed("%s item %d is not a pair", what, i)
		}
		out[i] = DictEntry{kv[0], kv[1]}
	}
	return out, nil
}

// newDefaultDict is defaultdict(factory); the factory is not kept.
func newDefaultDict(_ *hookEnv, args []any) (any, error) {
	if err := arity("defaultdict", args, 0, 1); err != nil {
		return nil, err
	}
	return &pyDict{class: "collections.defaultdict"}, nil
}

// setMaker is set(iterable) and frozenset(iterable).
func setMaker(frozen bool) hookFunc {
	return func(rt *hookEnv, args []any) (any, error) {
		if err := arity("set", args, 0, 1); err != nil {
			return nil, err
		}
		s := &pySet{frozen: frozen}
		if len(args) == 1 {
			var items []any
			switch x := args[0].(type) {
			case *pySet:
				items = x.items
			default:
				var ok bool
				if items, ok = seq(x); !ok {
					return nil, malformed("set argument is %T", x)
				}
			}
			if err := rt.charge(len(items)); err != nil {
				return nil, err
			}
			s.items = append([]any(nil), items...)
		}
		return s, nil
	}
}

// newByteArray is bytearray(), bytearray(bytes), bytearray(str, encoding)
// and bytearray(list of ints).
func newByteArray(rt *hookEnv, args []any) (any, error) {
	if err := arity("bytearray", args, 0, 1, 2); err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return []byte{}, nil
	}
	if len(args) == 2 {
		return codecsEncode(rt, args)
	}
	switch x := args[0].(type) {
	case []byte:
		if err := rt.charge(len(x)); err != nil {
			return nil, err
		}
		return append([]byte{}, x...), nil
	case *types.List:
		if err := rt.charge(len(*x)); err != nil {
			return nil, err
		}
		b := make([]byte, len(*x))
		for i, v := range *x {
			n, ok := v.(int)
			if !ok || n < 0 || n > 255 {
				return nil, malformed("bytearray item %v", v)
			}
			b[i] = byte(n)
		}
		return b, nil
	}
	return nil, malformed("bytearray argument is %T", args[0])
}

// newComplex is complex(real[, imag]).
func newComplex(_ *hookEnv, args []any) (any, error) {
	if err := arity("complex", args, 1, 2); err != nil {
		return nil, err
	}
	re, ok := asFloat(args[0])
	im := 0.0
	ok2 := true
	if len(args) == 2 {
		im, ok2 = asFloat(args[1])
	}
	if !ok || !ok2 {
		return nil, malformed("complex arguments are %T, %T", args[0], args[len(args)-1])
	}
	return complex(re, im), nil
}

// codecsEncode is _codecs.encode(str[, encoding[, errors]]), which protocol-2
// pickles use for bytes: _codecs.encode('\xff...', 'latin1').
func codecsEncode(rt *hookEnv, args []any) (any, error) {
	if err := arity("_codecs.encode", args, 1, 2, 3); err != nil {
		return nil, err
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, malformed("_codecs.encode argument is %T", args[0])
	}
	enc := "utf-8"
	if len(args) > 1 {
		if enc, ok = args[1].(string); !ok {
			return nil, malformed("_codecs.encode encoding is %T", args[1])
		}
	}
	if err := rt.charge(len(s)); err != nil {
		return nil, err
	}
	switch strings.ReplaceAll(strings.ToLower(enc), "_", "-") {
	case "utf-8", "utf8":
		return []byte(s), nil
	case "latin1", "latin-1", "iso-8859-1", "iso8859-1", "l1", "ascii", "us-ascii":
		max := rune(255)
		if strings.Contains(enc, "ascii") {
			max = 127
		}
		b := make([]byte, 0, len(s))
		for _, r := range s {
			if r > max {
				return nil, malformed("_codecs.encode: %U not in %s", r, enc)
			}
			b = append(b, byte(r))
		}
		return b, nil
	}
	return nil, malformed("_codecs.encode: unsupported encoding %q", enc)
}

// reconstructor is copyreg._reconstructor(cls, base, state), used by
// protocol 0 and 1 for instances of classes without __reduce__: an instance
// of cls, seeded with state when base is dict, OrderedDict or list.
func reconstructor(rt *hookEnv, args []any) (any, error) {
	if err := arity("copyreg._reconstructor", args, 3); err != nil {
		return nil, err
	}
	cls, ok := args[0].(*pyClass)
	if !ok {
		return nil, malformed("_reconstructor class is %T", args[0])
	}
	base, ok := args[1].(*pyClass)
	if !ok {
		return nil, malformed("_reconstructor base is %T", args[1])
	}
	state := args[2]
	var entries []DictEntry
	var items []any
	switch base.String() {
	case "builtins.object":
		if state != nil {
			return nil, malformed("_reconstructor with base object and state %T", state)
		}
	case "builtins.dict", "collections.OrderedDict":
		if state != nil {
			var err error
			if entries, err = entriesOf("_reconstructor state", state); err != nil {
				return nil, err
			}
		}
	case "builtins.list":
		if state != nil {
			if items, ok = seq(state); !ok {
				return nil, malformed("_reconstructor list state is %T", state)
			}
		}
	default:
		return nil, malformed("_reconstructor base %s is not supported", base)
	}
	if err := rt.charge(len(entries) + len(items)); err != nil {
		return nil, err
	}
	switch cls.kind {
	case kindObject, kindForeign:
		return &pyObj{cls: cls, args: []any{}, dictItems: append([]DictEntry(nil), entries...),
			listItems: append([]any(nil), items...)}, nil
	}
	if cls.String() == "collections.OrderedDict" || cls.String() == "builtins.dict" {
		d := &pyDict{entries: append([]DictEntry(nil), entries...)}
		if cls.name == "OrderedDict" {
			d.class = "collections.OrderedDict"
		}
		return d, nil
	}
	return nil, malformed("_reconstructor of %s is not supported", cls)
}

// newObj is copyreg.__newobj__(cls, *args), the protocol-0/1 spelling of NEWOBJ.
func newObj(_ *hookEnv, args []any) (any, error) {
	if len(args) == 0 {
		return nil, malformed("copyreg.__newobj__ without a class")
	}
	cls, ok := args[0].(*pyClass)
	if !ok {
		return nil, malformed("copyreg.__newobj__ class is %T", args[0])
	}
	return cls.PyNew(args[1:]...)
}

// ---- conversion of gopickle's values into this package's types ----

type converter struct {
	lim  Limits
	seen map[any]any
	ctx  context.Context
	n    int // items converted, for looking at ctx
}

// tick counts one item and looks at the context every ctxEvery items.
func (c *converter) tick() error {
	c.n++
	if c.n%ctxEvery == 0 && c.ctx != nil {
		return c.ctx.Err()
	}
	return nil
}

func newConverter(lim Limits) *converter {
	return &converter{lim: lim, seen: make(map[any]any)}
}

// argsKey identifies an argument slice shared between calls (gopickle
// passes a memoized tuple's backing array to every call that reuses it).
type argsKey struct {
	p *any
	n int
}

func (c *converter) checkLen(n int) error {
	if n > c.lim.MaxContainerLen {
		return limitErr("MaxContainerLen", "items in one container", int64(n), int64(c.lim.MaxContainerLen))
	}
	return nil
}

// value converts v. Containers are converted once each (shared and cyclic
// references stay shared and cyclic), with nesting bounded by MaxDepth.
func (c *converter) value(v any, depth int) (any, error) {
	switch x := v.(type) {
	case int:
		return int64(x), nil
	case *big.Int:
		if x.IsInt64() {
			return x.Int64(), nil
		}
		return x, nil
	case *types.ByteArray:
		return []byte(*x), nil
	case *pyTensor:
		if x.state != nil {
			if _, done := c.seen[x]; !done {
				c.seen[x] = x.t
				attrs, err := c.value(x.state, depth+1)
				if err != nil {
					return nil, err
				}
				x.t.Attributes = attrs
			}
		}
		return x.t, nil
	case *pyLegacyTensor:
		return x.tensor(), nil
	case *pyClass:
		if x.kind != kindObject && x.kind != kindForeign {
			return Global{x.module, x.name}, nil
		}
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		return c.object(v, x, depth)
	case *pyObj:
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		return c.object(v, x.cls, depth)
	case *types.Tuple:
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		out := make(Tuple, len(*x))
		c.seen[v] = &out
		return &out, c.fill(out, *x, depth)
	case *types.List:
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		out := make(List, len(*x))
		c.seen[v] = &out
		return &out, c.fill(out, *x, depth)
	case *types.Dict:
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		out := &Dict{}
		c.seen[v] = out
		raw := make([]DictEntry, len(*x))
		for i, e := range *x {
			raw[i] = DictEntry{e.Key, e.Value}
		}
		return out, c.dict(out, raw, depth)
	case *pyDict:
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		out := &Dict{Class: x.class}
		c.seen[v] = out
		if err := c.dict(out, x.entries, depth); err != nil {
			return nil, err
		}
		var err error
		out.State, err = c.value(x.state, depth+1)
		return out, err
	case *pySet:
		if out, done, err := c.visit(v, depth); done {
			return out, err
		}
		out := &Set{Frozen: x.frozen}
		c.seen[v] = out
		return out, c.set(out, x.items, depth)
	}
	return v, nil
}

// visit returns the earlier conversion of a container, or an error when
// converting it would nest deeper than MaxDepth; done is false when the
// caller should convert v now.
func (c *converter) visit(v any, depth int) (out any, done bool, err error) {
	if out, ok := c.seen[v]; ok {
		return out, true, nil
	}
	if depth >= c.lim.MaxDepth {
		return nil, true, limitErr("MaxDepth", "levels of nested values", int64(depth+1), int64(c.lim.MaxDepth))
	}
	return nil, false, nil
}

func (c *converter) fill(out, in []any, depth int) error {
	if err := c.checkLen(len(in)); err != nil {
		return err
	}
	for i, e := range in {
		if err := c.tick(); err != nil {
			return err
		}
		v, err := c.value(e, depth+1)
		if err != nil {
			return err
		}
		out[i] = v
	}
	return nil
}

func (c *converter) dict(out *Dict, raw []DictEntry, depth int) error {
	if err := c.checkLen(len(raw)); err != nil {
		return err
	}
	pos := make(map[any]int, len(raw))
	for _, e := range raw {
		if err := c.tick(); err != nil {
			return err
		}
		k, err := c.value(e.Key, depth+1)
		if err != nil {
			return err
		}
		v, err := c.value(e.Value, depth+1)
		if err != nil {
			return err
		}
		if hk, ok := hashKey(k); ok {
			if i, dup := pos[hk]; dup {
				out.Entries[i].Value = v
				continue
			}
			pos[hk] = len(out.Entries)
		}
		out.Entries = append(out.Entries, DictEntry{k, v})
	}
	return nil
}

func (c *converter) set(out *Set, raw []any, depth int) error {
	if err := c.checkLen(len(raw)); err != nil {
		return err
	}
	seen := make(map[any]bool, len(raw))
	for _, e := range raw {
		v, err := c.value(e, depth+1)
		if err != nil {
			return err
		}
		if hk, ok := hashKey(v); ok {
			if seen[hk] {
				continue
			}
			seen[hk] = true
		}
		out.Items = append(out.Items, v)
	}
	return nil
}

// object converts an instance (o is a *pyObj) or a class used as a value
// (o is the *pyClass) into *Object or *Foreign.
func (c *converter) object(o any, cls *pyClass, depth int) (any, error) {
	// Object and Foreign share a layout; fill one through pointers to its fields.
	var out any
	var args, list *[]any
	var items *[]DictEntry
	var state *any
	if cls.kind == kindObject {
		x := &Object{Module: cls.module, Name: cls.name}
		out, args, list, items, state = x, &x.Args, &x.ListItems, &x.DictItems, &x.State
	} else {
		x := &Foreign{Module: cls.module, Name: cls.name}
		out, args, list, items, state = x, &x.Args, &x.ListItems, &x.DictItems, &x.State
	}
	c.seen[o] = out
	p, ok := o.(*pyObj)
	if !ok {
		return out, nil
	}
	var err error
	if *args, err = c.args(p.args, depth); err != nil {
		return nil, err
	}
	if *state, err = c.value(p.state, depth+1); err != nil {
		return nil, err
	}
	if len(p.dictItems) > 0 {
		d := &Dict{}
		if err := c.dict(d, p.dictItems, depth); err != nil {
			return nil, err
		}
		*items = d.Entries
	}
	if len(p.listItems) > 0 {
		*list = make([]any, len(p.listItems))
		if err := c.fill(*list, p.listItems, depth); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// args converts constructor arguments, once per shared backing array.
func (c *converter) args(in []any, depth int) ([]any, error) {
	if len(in) == 0 {
		return in, nil
	}
	key := argsKey{&in[0], len(in)}
	if out, ok := c.seen[key]; ok {
		return out.([]any), nil
	}
	out := make([]any, len(in))
	c.seen[key] = out
	return out, c.fill(out, in, depth)
}

// bytesKey and bigKey keep bytes and big ints apart from strings in hashKey.
type (
	bytesKey string
	bigKey   string
)

// maxKeyLen bounds the keys hashKey compares by value, so that a long key
// shared through the memo cannot make dict building quadratic.
const maxKeyLen = 1024

// hashKey returns a comparable key for the values Dict and Set compare by
// value, and pointers for the ones compared by identity.
func hashKey(v any) (any, bool) {
	switch x := v.(type) {
	case nil, bool, int64, Global, Device, complex128:
		return x, true
	case float64:
		return x, !math.IsNaN(x)
	case string:
		return x, len(x) <= maxKeyLen
	case []byte:
		return bytesKey(x), len(x) <= maxKeyLen
	case *big.Int:
		if x.BitLen() > 8*maxKeyLen {
			return nil, false
		}
		return bigKey(x.Text(16)), true
	case *Tuple, *List, *Dict, *Set, *Object, *Foreign, *Tensor, *StorageRef:
		return x, true
	}
	return nil, false
}
