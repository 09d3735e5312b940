package statedict

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
)

// builder turns an unpickled tree into the Checkpoint model.
//
// A pickle can share a container under several names through its memo
// (tied weights are one tensor under two names, and torch lists both), so
// a few hundred bytes can name exponentially many paths: a list of two
// references to a list of two references to ... The walk names every path,
// as torch would, but counts its work against a budget that grows with the
// pickle's size (see WithMaxNames): every node visited counts one name,
// every byte of a name built counts one byte.
type builder struct {
	ck        *Checkpoint
	record    string // the pickle's record, for messages
	ctx       context.Context
	nodes     int64 // nodes visited (names given)
	nameBytes int64 // bytes of the names built
	maxNodes  int64
	maxBytes  int64
	onPath    map[any]bool // containers on the current path (cycle guard)
	storages  map[*Storage]bool
	script    map[string]*scriptClass // a TorchScript archive's class declarations
}

// newBuilder makes the builder for the object tree of a pickle of
// pickleSize bytes read from record.
func newBuilder(ck *Checkpoint, record string, cfg *config, pickleSize int64) *builder {
	b := &builder{ck: ck, record: record, ctx: cfg.ctx, onPath: make(map[any]bool), storages: make(map[*Storage]bool)}
	b.maxNodes, b.maxBytes = cfg.maxNames, cfg.maxNameBytes
	if b.maxNodes <= 0 {
		b.maxNodes = defaultNamesBase + pickleSize/defaultBytesPerName
	}
	if b.maxBytes <= 0 {
		b.maxBytes = defaultNameBytesBase + defaultNameBytesPerByte*pickleSize
	}
	if b.ctx == nil {
		b.ctx = context.Background()
	}
	return b
}

// count charges one node named name to the walk's budget, and looks at the
// context every few thousand nodes.
func (b *builder) count(name string) error {
	b.nodes++
	b.nameBytes += int64(len(name))
	switch {
	case b.nodes > b.maxNodes:
		return b.fail("", &pickle.LimitError{Limit: "statedict.WithMaxNames", What: "names in the object tree (shared containers count once per name)", Value: b.nodes, Max: b.maxNodes})
	case b.nameBytes > b.maxBytes:
		return b.fail("", &pickle.LimitError{Limit: "statedict.WithMaxNameBytes", What: "bytes of names in the object tree", Value: b.nameBytes, Max: b.maxBytes})
	case b.nodes%4096 == 0:
		if err := b.ctx.Err(); err != nil {
			return b.fail("", err)
		}
	}
	return nil
}

func (b *builder) fail(tensor string, err error) error {
	return &Error{Record: b.record, Tensor: tensor, Err: err}
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// walk visits v at the given name. tensorsOnly is set below opaque and
// foreign objects: tensors there are still real tensors, other leaves are
// part of the object.
func (b *builder) walk(v any, name string, tensorsOnly bool) error {
	if err := b.count(name); err != nil {
		return err
	}
	switch x := v.(type) {
	case *pickle.Tensor:
		return b.addTensor(x, name)
	case *pickle.Dict:
		if b.enter(x) {
			return nil
		}
		defer delete(b.onPath, x)
		for _, e := range x.Entries {
			if err := b.walk(e.Value, join(name, pickle.KeyName(e.Key)), tensorsOnly); err != nil {
				return err
			}
		}
	case *pickle.List:
		return b.walkSeq(x, *x, name, tensorsOnly)
	case *pickle.Tuple:
		return b.walkSeq(x, *x, name, tensorsOnly)
	case *pickle.Object:
		if !tensorsOnly {
			b.ck.Opaque = append(b.ck.Opaque, Object{Name: name, Type: x.Module + "." + x.Name, Value: x})
		}
		if b.enter(x) {
			return nil
		}
		defer delete(b.onPath, x)
		return b.walk(x.State, name, true)
	case *pickle.Foreign:
		b.ck.Foreign = append(b.ck.Foreign, Object{Name: name, Type: x.Module + "." + x.Name, Value: x})
		if cls := b.script[x.Module+"."+x.Name]; cls != nil {
			if st, ok := x.State.(*pickle.Dict); ok {
				return b.walkScriptModule(x, cls, st, name)
			}
		}
		if st, ok := moduleState(x); ok {
			return b.walkModule(x, st, name)
		}
		if b.enter(x) {
			return nil
		}
		defer delete(b.onPath, x)
		if err := b.walk(x.State, name, true); err != nil {
			return err
		}
		for i, a := range x.Args {
			if err := b.walk(a, join(name, strconv.Itoa(i)), true); err != nil {
				return err
			}
		}
	case *pickle.StorageRef:
		return b.addStorageValue(x, name, tensorsOnly)
	default:
		if !tensorsOnly {
			b.ck.Objects = append(b.ck.Objects, Object{Name: name, Type: pickle.TypeName(v), Value: v})
		}
	}
	return nil
}

// addStorageValue records a storage saved as a value of its own
// (torch.save(t.storage()), a TypedStorage or UntypedStorage in a
// container): an Object of type torch.storage.TypedStorage, as torch.load
// returns every storage, whose Value is the *pickle.StorageRef, and the
// storage itself, whose bytes must all be in the file.
func (b *builder) addStorageValue(ref *pickle.StorageRef, name string, tensorsOnly bool) error {
	s, ok := ref.Ref.(*Storage)
	if !ok || s == nil {
		return b.fail(name, fmt.Errorf("%w: storage without a resolved record", ErrMalformed))
	}
	if s.DType == dtype.Invalid {
		s.DType = dtype.Uint8 // an untyped storage: torch.load makes it a uint8 TypedStorage
	}
	if want := ref.Len() * int64(max(s.DType.Size(), 1)); s.NBytes < want {
		return &Error{Record: s.Record, Tensor: name, Err: fmt.Errorf("%w: storage %s of %d elements needs %d bytes, has %d",
			ErrShortStorage, s.Key, ref.Len(), want, s.NBytes)}
	}
	b.addStorage(s)
	if !tensorsOnly {
		b.ck.Objects = append(b.ck.Objects, Object{Name: name, Type: pickle.TypeName(ref), Value: ref})
	}
	return nil
}

// walkSeq visits the items of a list or tuple c, named by index.
func (b *builder) walkSeq(c any, items []any, name string, tensorsOnly bool) error {
	if b.enter(c) {
		return nil
	}
	defer delete(b.onPath, c)
	for i, e := range items {
		if err := b.walk(e, join(name, strconv.Itoa(i)), tensorsOnly); err != nil {
			return err
		}
	}
	return nil
}

// enter marks a container as on the current path; it reports true when the
// container is already there (a cycle), which the walk then skips.
func (b *builder) enter(c any) bool {
	if b.onPath[c] {
		return true
	}
	b.onPath[c] = true
	return false
}

func (b *builder) addTensor(pt *pickle.Tensor, name string) (err error) {
	if local, d, ok := dtensorOf(pt); ok {
		return b.addDTensor(pt, local, d, name)
	}
	t, err := b.makeTensor(pt, name)
	if err != nil {
		return err
	}
	if pt.Attributes != nil {
		// A wrapper subclass keeps its real data in its attributes
		// ({'elem': tensor}): those tensors are listed under name.attr.
		defer func() {
			if err == nil {
				err = b.walk(pt.Attributes, name, true)
			}
		}()
	}
	if len(pt.Components) == 0 {
		b.ck.Tensors = append(b.ck.Tensors, t)
		b.addStorage(t.Storage)
		return nil
	}
	var g *sparseGroup
	if t.Layout != Nested && t.Layout != Jagged {
		g = &sparseGroup{name: name, layout: t.Layout, shape: pt.Shape, coalesced: pt.Coalesced, parts: map[string]*Tensor{}}
	}
	for _, c := range pt.Components {
		ct, err := b.makeTensor(c.Tensor, join(name, c.Name))
		if err != nil {
			return err
		}
		ct.Layout = t.Layout
		ct.Component = c.Name
		ct.RequiresGrad = t.RequiresGrad
		ct.Parameter = t.Parameter
		if g != nil {
			g.parts[c.Name] = ct
			ct.Storage.addSparse(g)
		}
		b.ck.Tensors = append(b.ck.Tensors, ct)
		b.addStorage(ct.Storage)
	}
	return nil
}

func (b *builder) addStorage(s *Storage) {
	if s != nil && !b.storages[s] {
		b.storages[s] = true
		b.ck.Storages = append(b.ck.Storages, s)
	}
}

// makeTensor validates a rebuilt tensor against its storage.
func (b *builder) makeTensor(pt *pickle.Tensor, name string) (*Tensor, error) {
	if pt == nil {
		return nil, b.fail(name, fmt.Errorf("%w: missing tensor", ErrMalformed))
	}
	t := &Tensor{
		Name:         name,
		Shape:        pt.Shape,
		Strides:      pt.Stride,
		Offset:       pt.Offset,
		RequiresGrad: pt.RequiresGrad,
		Parameter:    pt.Parameter,
		Layout:       Layout(pt.Layout),
		Subclass:     pt.Subclass,
		Device:       pt.Device,
	}
	if t.Layout == "" {
		t.Layout = Strided
	}
	dt, ok := dtype.Parse(pt.DType)
	if !ok {
		return nil, b.fail(name, fmt.Errorf("%w: unknown dtype %q", ErrMalformed, pt.DType))
	}
	t.DType = dt
	if len(t.Strides) == 0 && len(t.Shape) > 0 && pt.Storage == nil {
		t.Strides = contiguousStrides(t.Shape)
	}
	if len(t.Shape) != len(t.Strides) {
		return nil, b.fail(name, fmt.Errorf("%w: %d sizes but %d strides", ErrMalformed, len(t.Shape), len(t.Strides)))
	}
	if t.Offset < 0 {
		return nil, b.fail(name, fmt.Errorf("%w: negative storage offset %d", ErrMalformed, t.Offset))
	}
	for i, s := range t.Shape {
		if s < 0 || t.Strides[i] < 0 {
			return nil, b.fail(name, fmt.Errorf("%w: negative size or stride in dimension %d", ErrMalformed, i))
		}
	}
	if t.NBytes() < 0 {
		return nil, b.fail(name, fmt.Errorf("%w: shape %v", ErrOverflow, t.Shape))
	}
	if q := pt.Quant; q != nil {
		t.Quant = &Quantization{Scheme: q.Scheme, Scale: q.Scale, ZeroPoint: q.ZeroPoint, Axis: q.Axis}
		var err error
		if t.Quant.Scales, err = b.optTensor(q.Scales, join(name, "scales")); err != nil {
			return nil, err
		}
		if t.Quant.Zeros, err = b.optTensor(q.ZeroPoints, join(name, "zero_points")); err != nil {
			return nil, err
		}
	}
	if pt.Storage == nil {
		t.Meta = true
		if t.Device == "" {
			t.Device = "meta"
		}
		return t, nil
	}
	s, ok := pt.Storage.Ref.(*Storage)
	if !ok || s == nil {
		return nil, b.fail(name, fmt.Errorf("%w: tensor without a resolved storage", ErrMalformed))
	}
	t.Storage = s
	t.Device = s.Location
	if s.DType == dtype.Invalid {
		s.DType = dt
	}
	end, ok := extentBytes(t)
	if !ok {
		return nil, b.fail(name, fmt.Errorf("%w: offset %d with shape %v and strides %v", ErrOverflow, t.Offset, t.Shape, t.Strides))
	}
	if end > s.NBytes {
		return nil, &Error{Record: s.Record, Tensor: name, Err: fmt.Errorf("%w: tensor needs bytes up to %d, storage %s has %d",
			ErrShortStorage, end, s.Key, s.NBytes)}
	}
	return t, nil
}

func (b *builder) optTensor(pt *pickle.Tensor, name string) (*Tensor, error) {
	if pt == nil {
		return nil, nil
	}
	return b.makeTensor(pt, name)
}

// extentBytes is the byte just past the last element the tensor reaches in
// its storage (0 for an empty tensor), with overflow checks.
func extentBytes(t *Tensor) (int64, bool) {
	if t.NumEl() == 0 {
		return 0, true
	}
	last := uint64(t.Offset)
	for i, s := range t.Shape {
		hi, lo := bits.Mul64(uint64(s-1), uint64(t.Strides[i]))
		if hi != 0 {
			return 0, false
		}
		var carry uint64
		last, carry = bits.Add64(last, lo, 0)
		if carry != 0 || last >= 1<<62 {
			return 0, false
		}
	}
	n := last + 1
	if k := uint64(t.DType.PerByte()); k > 1 { // packed: element i is in byte i/k
		n = (n + k - 1) / k
	}
	hi, lo := bits.Mul64(n, uint64(t.DType.Size()))
	if hi != 0 || lo >= 1<<62 {
		return 0, false
	}
	return int64(lo), true
}

func contiguousStrides(shape []int64) []int64 {
	st := make([]int64, len(shape))
	acc := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = acc
		if shape[i] > 0 {
			acc *= shape[i]
		}
	}
	return st
}
