package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
	"github.com/ckpt-dev/ckpt/statedict"
)

// GGUF output: llama.cpp's format. Each tensor is written with its sizes
// reversed (GGUF lists the fastest-varying first), in the ggml type
// WithGGUFType names or, without it, the type it has: a GGUF input's
// tensors keep their ggml type (quantized blocks are copied bit for bit),
// float32/float16/bfloat16/float64 and int8 to int64 tensors are written
// as F32/F16/BF16/F64/I8-I64. With a type, the rule of llama.cpp's
// converter applies: 1-D tensors and norms (names ending in "norm.weight")
// stay F32, a tensor whose last dimension is not a multiple of the type's
// block falls back to F16, and integer tensors keep their type.
// Quantization is ggml's reference quantizer (package ggml), bit for bit.
// A quantized release's gpt-oss MXFP4 weights are written from their
// stored blocks (gguf_mxfp4.go); Summary.GGUFTypes says which type each
// tensor got and why some did not get WithGGUFType's (gguf_types.go).
//
// Metadata: a GGUF input's entries are kept in order, then
// WithGGUFMetadata's entries replace or extend them; general.architecture
// is required, general.quantization_version (2) is added when a tensor is
// quantized. A safetensors output of a GGUF input keeps the GGUF
// metadata, tensor order and types in its __metadata__ (GGUFKey), from
// which a GGUF output is rebuilt byte for byte for unquantized types.

// GGUFKey is the safetensors __metadata__ key holding a GGUF input's
// metadata, tensor order and types (JSON).
const GGUFKey = "ckpt.gguf"

// ggufKeep is what a GGUF input (or a safetensors file written from one)
// says about the file to rebuild.
type ggufKeep struct {
	Version   uint32      `json:"version"`
	Alignment int64       `json:"alignment"`
	Metadata  []gguf.KV   `json:"metadata"`
	Tensors   []ggufEntry `json:"tensors"`
}

type ggufEntry struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// WithGGUFType sets the ggml type of a GGUF output's weights: f32, f16,
// bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, mxfp4 (what
// ggml.Quantize writes); see GGUF for the tensors that keep another type.
func WithGGUFType(name string) Option { return func(c *options) { c.ggufType = name } }

// WithGGUFMetadata adds (or replaces) metadata entries of a GGUF output.
func WithGGUFMetadata(kvs ...gguf.KV) Option {
	return func(c *options) { c.ggufMeta = append(c.ggufMeta, kvs...) }
}

// ParseGGUFMeta parses a --gguf-meta argument: KEY=VALUE, the type
// inferred (true/false: bool; an integer: uint32 when it fits, else int32
// or int64/uint64; a number: float32; anything else: string), or
// KEY:TYPE=VALUE with a GGUF value type (uint8 ... float64, bool, string).
func ParseGGUFMeta(s string) (gguf.KV, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return gguf.KV{}, fmt.Errorf("%w: --gguf-meta %q: want KEY=VALUE or KEY:TYPE=VALUE", ErrOption, s)
	}
	if name, typ, ok := strings.Cut(k, ":"); ok {
		for t := gguf.ValueType(0); t.Known(); t++ {
			if t.String() == typ && t != gguf.TypeArray {
				val, err := gguf.ParseValue(t, v)
				if err != nil {
					return gguf.KV{}, fmt.Errorf("%w: --gguf-meta %q: %v", ErrOption, s, err)
				}
				return gguf.KV{Key: name, Type: t, Value: val}, nil
			}
		}
		return gguf.KV{}, fmt.Errorf("%w: --gguf-meta %q: unknown type %q", ErrOption, s, typ)
	}
	for _, t := range []gguf.ValueType{gguf.TypeBool, gguf.TypeUint32, gguf.TypeInt32, gguf.TypeInt64, gguf.TypeUint64, gguf.TypeFloat32} {
		if val, err := gguf.ParseValue(t, v); err == nil {
			if f, ok := val.(float32); ok && (math.IsInf(float64(f), 0) || math.IsNaN(float64(f))) {
				continue // "inf" and "nan" stay text unless KEY:float32= says otherwise
			}
			return gguf.KV{Key: k, Type: t, Value: val}, nil
		}
	}
	return gguf.KV{Key: k, Type: gguf.TypeString, Value: v}, nil
}

// ParseGGUFMetaJSON parses a --gguf-meta-file: either a list of entries in
// the form `ckpt inspect --json` gives them ({"key", "type", "value"}), or
// an object of KEY: VALUE with types inferred as ParseGGUFMeta infers
// them (JSON strings stay strings).
func ParseGGUFMetaJSON(b []byte) ([]gguf.KV, error) {
	var list []gguf.KV
	if err := json.Unmarshal(b, &list); err == nil {
		return list, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("%w: GGUF metadata file: %v", ErrOption, err)
	}
	var out []gguf.KV
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		var s string
		if json.Unmarshal(obj[k], &s) == nil {
			out = append(out, gguf.KV{Key: k, Type: gguf.TypeString, Value: s})
			continue
		}
		kv, err := ParseGGUFMeta(k + "=" + string(obj[k]))
		if err != nil {
			return nil, err
		}
		out = append(out, kv)
	}
	return out, nil
}

// ggufSource returns what the input says about a GGUF to rebuild: a GGUF
// input's header, or a safetensors input's GGUFKey metadata.
func ggufSource(ck *statedict.Checkpoint) (*ggufKeep, error) {
	if f := ck.GGUF; f != nil {
		k := &ggufKeep{Version: f.Version, Alignment: f.Alignment, Metadata: f.KV}
		for _, t := range f.Tensors {
			k.Tensors = append(k.Tensors, ggufEntry{t.Name, t.Type.String()})
		}
		return k, nil
	}
	if s, ok := ck.Metadata[GGUFKey]; ok {
		var k ggufKeep
		if err := json.Unmarshal([]byte(s), &k); err != nil {
			return nil, fmt.Errorf("%w: __metadata__ %s: %v", ErrFormat, GGUFKey, err)
		}
		return &k, nil
	}
	return nil, nil
}

// ggufPlan is how one item goes into a GGUF output.
type ggufPlan struct {
	typ   ggml.Type
	shape []int64 // the shape written (C order)
	// reason says why typ is not WithGGUFType's type ("" when it is, or
	// without WithGGUFType).
	reason string
	// mx is set for a gpt-oss MXFP4 weight, written from its stored
	// blocks in their orientation (gguf_mxfp4.go).
	mx *mxfp4Source
}

// ggufOutType decides the ggml type and shape an item is written as.
func (c *config) ggufOutType(it *item, keep map[string]string) (ggufPlan, error) {
	src := it.src
	p := ggufPlan{shape: src.Shape}
	var want ggml.Type
	if c.ggufType != "" {
		var err error
		if want, err = ggml.ParseType(c.ggufType); err != nil {
			return p, err
		}
	}
	if mx := ggufMXFP4Source(src); mx != nil {
		if a := c.ggufArch; a != nil {
			if parity, ok := a.halves[it]; ok {
				var err error
				if mx, err = mx.half(parity); err != nil {
					return p, err
				}
			}
		}
		p.mx, p.shape = mx, mx.lay.Shape()
		if c.ggufType == "" && c.dtype != dtype.Invalid {
			// --dtype without --gguf-type: the values, in that dtype.
			t, err := dtypeGGML(c.dtype)
			p.typ = t
			return p, err
		}
		p.typ, p.reason = mxfp4OutType(c.ggufType != "", want)
		return p, nil
	}
	var err error
	if c.ggufType == "" {
		if why := c.ggufF32(it); why != "" && isFloat(it.dtype) && c.ggufArch.f32Always() {
			p.typ = ggml.F32
			return p, nil
		}
		p.typ, err = c.ggufKeptType(it, keep)
		return p, err
	}
	switch why := c.ggufF32(it); {
	case !isFloat(it.dtype):
		p.typ, err = dtypeGGML(it.dtype)
		p.reason = "integer tensors keep their type"
	case why != "":
		p.typ, p.reason = ggml.F32, why
	case want.Quantized() && src.Shape[len(src.Shape)-1]%want.BlockSize() != 0:
		p.typ = ggml.F16
		p.reason = fmt.Sprintf("rows of %d not a multiple of %s's %d", src.Shape[len(src.Shape)-1], want, want.BlockSize())
	default:
		p.typ = want
	}
	if p.typ == want {
		p.reason = ""
	}
	return p, err
}

// ggufKeptType is the type an item is written as without WithGGUFType:
// a GGUF input's own, or its dtype's.
func (c *config) ggufKeptType(it *item, keep map[string]string) (ggml.Type, error) {
	if src := it.src; src.GGML != nil {
		return ggml.ParseType(src.GGML.Type)
	}
	if name, ok := keep[it.name]; ok {
		if t, err := ggml.ParseType(name); err == nil && !t.Quantized() && ggmlDType(t) == it.dtype {
			return t, nil
		}
	}
	return dtypeGGML(it.dtype)
}

func isFloat(d dtype.DType) bool {
	return d == dtype.Float32 || d == dtype.Float16 || d == dtype.BFloat16 || d == dtype.Float64
}

func ggmlDType(t ggml.Type) dtype.DType {
	d, _ := statedict.GGMLDType(t)
	return d
}

func dtypeGGML(d dtype.DType) (ggml.Type, error) {
	if t, ok := statedict.DTypeGGML(d); ok {
		return t, nil
	}
	return 0, fmt.Errorf("GGUF has no type for %s", d)
}

// ggufUnsupported says why a tensor cannot go into a GGUF file.
func ggufUnsupported(t *statedict.Tensor) string {
	if _, err := dtypeGGML(t.DType); err != nil {
		return "GGUF has no type for " + t.DType.String()
	}
	if len(t.Shape) > gguf.MaxDims {
		return fmt.Sprintf("%d dimensions (GGUF holds at most %d)", len(t.Shape), gguf.MaxDims)
	}
	return ""
}

// writeGGUF writes one GGUF file holding items.
func (c *config) writeGGUF(ctx context.Context, w io.Writer, items []*item) (int64, error) {
	keep := c.ggufKeep
	types := map[string]string{}
	if keep != nil {
		for _, e := range keep.Tensors {
			types[e.Name] = e.Type
		}
		items = ggufOrder(items, keep)
	}
	var kvs []gguf.KV
	if keep != nil {
		kvs = append(kvs, keep.Metadata...)
	}
	set := func(kv gguf.KV) {
		for i := range kvs {
			if kvs[i].Key == kv.Key {
				kvs[i] = kv
				return
			}
		}
		kvs = append(kvs, kv)
	}
	var derived []gguf.KV
	if c.ggufArch != nil {
		derived = c.ggufArch.kvs
	}
	for _, kv := range slices.Concat(derived, c.ggufMeta) {
		set(kv)
	}
	items, err := c.ggufExpand(items)
	if err != nil {
		return 0, err
	}
	specs := make([]gguf.TensorSpec, len(items))
	plans := make([]ggufPlan, len(items))
	reads := make([]*item, len(items)) // what each tensor's data is read from
	typesRep := newGGUFTypes(c.ggufType)
	quantized := false
	for i, it := range items {
		// A permuted q/k tensor reads through a view of its source.
		src, err := c.ggufPermuted(it)
		if err != nil {
			return 0, err
		}
		reads[i] = it
		if src != it.src {
			view := *it
			view.src = src
			reads[i] = &view
			c.ggufArch.report.Permuted++
		}
		p, err := c.ggufOutType(it, types)
		if err != nil {
			return 0, &TensorError{Name: it.name, Err: err}
		}
		plans[i] = p
		typesRep.add(it.name, p)
		quantized = quantized || p.typ.Quantized()
		dims := make([]uint64, len(p.shape))
		for j, s := range p.shape {
			dims[len(dims)-1-j] = uint64(s)
		}
		if len(dims) == 0 {
			dims = []uint64{1} // a 0-dim tensor is written as one element
		}
		specs[i] = gguf.TensorSpec{Name: it.name, Dims: dims, Type: p.typ}
	}
	// Tensors llama.cpp's converter adds (rope_freqs.weight), unless the
	// input has one of that name.
	var extra []ggufExtra
	if c.ggufArch != nil {
		for _, e := range c.ggufArch.extra {
			if !slices.ContainsFunc(specs, func(s gguf.TensorSpec) bool { return s.Name == e.name }) {
				extra = append(extra, e)
				specs = append(specs, gguf.TensorSpec{Name: e.name, Dims: []uint64{uint64(len(e.data))}, Type: ggml.F32})
				typesRep.add(e.name, ggufPlan{typ: ggml.F32})
			}
		}
	}
	if quantized {
		if _, ok := gguf.Lookup(kvs, "general.quantization_version"); !ok {
			set(gguf.KV{Key: "general.quantization_version", Type: gguf.TypeUint32, Value: uint32(2)})
		}
	}
	if _, ok := gguf.Lookup(kvs, "general.architecture"); !ok {
		return 0, fmt.Errorf("%w: a GGUF file needs general.architecture: pass --gguf-meta general.architecture=NAME (llama, qwen2, ...)", ErrOption)
	}
	if keep != nil && keep.Alignment != gguf.DefaultAlignment {
		if _, ok := gguf.Lookup(kvs, "general.alignment"); !ok {
			set(gguf.KV{Key: "general.alignment", Type: gguf.TypeUint32, Value: uint32(keep.Alignment)})
		}
	}
	typesRep.finish()
	if c.ggufTypes != nil {
		*c.ggufTypes = *typesRep
	}
	gw, err := gguf.NewWriter(w, kvs, specs)
	if err != nil {
		return 0, err
	}
	var total int64
	for i, it := range reads {
		n, err := c.writeGGUFTensor(ctx, gw, it, plans[i])
		total += n
		if err != nil {
			return total, err
		}
	}
	for _, e := range extra {
		b := make([]byte, 4*len(e.data))
		for i, f := range e.data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		if err := gw.WriteTensor(bytes.NewReader(b)); err != nil {
			return total, &TensorError{Name: e.name, Err: err}
		}
		total += int64(len(b))
	}
	return total, gw.Close()
}

// ggufOrder puts the tensors the kept GGUF lists in its order, others after.
func ggufOrder(items []*item, keep *ggufKeep) []*item {
	pos := map[string]int{}
	for i, e := range keep.Tensors {
		pos[e.Name] = i
	}
	out := make([]*item, 0, len(items))
	byPos := make([]*item, len(keep.Tensors))
	for _, it := range items {
		if p, ok := pos[it.name]; ok && byPos[p] == nil {
			byPos[p] = it
		}
	}
	for _, it := range byPos {
		if it != nil {
			out = append(out, it)
		}
	}
	for _, it := range items {
		if p, ok := pos[it.name]; !ok || byPos[p] != it {
			out = append(out, it)
		}
	}
	return out
}

// ggufRows is how many elements one quantization step handles at most.
const ggufRows = 1 << 20

// writeGGUFTensor writes one tensor's data as planned.
func (c *config) writeGGUFTensor(ctx context.Context, gw *gguf.Writer, it *item, p ggufPlan) (int64, error) {
	if p.mx != nil {
		return c.writeGGUFMXFP4(ctx, gw, it, p)
	}
	src, t := it.src, p.typ
	// Blocks of the same type are copied as they are.
	if src.GGML != nil && src.GGML.Type == t.String() && t.Quantized() {
		r, err := src.GGMLRaw()
		if err != nil {
			return 0, err
		}
		if err := gw.WriteTensor(ctxReader{ctx, r}); err != nil {
			return 0, &TensorError{Name: it.name, Err: err}
		}
		c.progressAdd(src.GGML.NBytes)
		return src.GGML.NBytes, nil
	}
	// Elements already of the type's dtype are copied through the usual
	// checked reader (byte-swapped from a big-endian input).
	if dt := ggmlDType(t); dt != dtype.Invalid && dt == it.dtype {
		rc, _, err := c.itemReader(ctx, it)
		if err != nil {
			return 0, err
		}
		defer rc.Close()
		if err := gw.WriteTensor(rc); err != nil {
			return 0, &TensorError{Name: it.name, Err: err}
		}
		return it.nbytes(), nil
	}
	// Everything else goes through float32 and ggml's quantizer, whole
	// rows at a time.
	f32 := *it
	f32.dtype = dtype.Float32
	rc, _, err := c.itemReader(ctx, &f32)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	row := int64(1)
	if len(src.Shape) > 0 {
		row = src.Shape[len(src.Shape)-1]
	}
	return ggufQuantizeStream(gw, it.name, rc, src.NumEl(), row, t)
}

// ggufQuantizeStream writes n float32 elements read from rc (little-endian,
// rows of row elements) as type t, quantized whole rows at a time.
func ggufQuantizeStream(gw *gguf.Writer, name string, rc io.Reader, n, row int64, t ggml.Type) (int64, error) {
	if row <= 0 {
		row = 1
	}
	chunk := max(row, ggufRows/row*row)
	k0 := min(chunk, max(n, 1))
	rb, err := t.RowBytes(k0)
	if err != nil {
		return 0, &TensorError{Name: name, Err: err}
	}
	buf := getGGUFBuf(k0, rb)
	fs, out := buf.fs[:k0], buf.out[:rb]
	// The float32 bytes are read straight into fs (little-endian hosts;
	// others decode in place).
	in := unsafe.Slice((*byte)(unsafe.Pointer(&fs[0])), 4*len(fs))
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		for left := n; left > 0 && err == nil; {
			k := min(left, int64(len(fs)))
			if _, err = io.ReadFull(rc, in[:k*4]); err != nil {
				break
			}
			if !hostLittleEndian {
				for i := range fs[:k] {
					fs[i] = math.Float32frombits(binary.LittleEndian.Uint32(in[4*i:]))
				}
			}
			var ob int64
			if ob, err = t.RowBytes(k); err != nil {
				break
			}
			if err = ggufQuantize(t, fs[:k], out[:ob], row); err != nil {
				break
			}
			_, err = pw.Write(out[:ob])
			left -= k
		}
		pw.CloseWithError(err)
	}()
	werr := gw.WriteTensor(pr)
	pr.Close()
	<-done // the buffers are free once the goroutine is
	ggufBufs.Put(buf)
	if werr != nil {
		return 0, &TensorError{Name: name, Err: werr}
	}
	size, _ := t.RowBytes(n)
	return size, nil
}

// ggufBuf holds one tensor's float32 rows and their quantized blocks;
// ggufBufs keeps them between tensors (a model's many equal-sized
// tensors would otherwise allocate, and fault in, fresh buffers each).
type ggufBuf struct {
	fs  []float32
	out []byte
}

var ggufBufs sync.Pool

// getGGUFBuf returns a buffer of at least n floats and ob bytes.
func getGGUFBuf(n, ob int64) *ggufBuf {
	b, _ := ggufBufs.Get().(*ggufBuf)
	if b == nil {
		b = &ggufBuf{}
	}
	if int64(cap(b.fs)) < n {
		b.fs = make([]float32, n)
	}
	if int64(cap(b.out)) < ob {
		b.out = make([]byte, ob)
	}
	b.fs, b.out = b.fs[:cap(b.fs)], b.out[:cap(b.out)]
	return b
}

// hostLittleEndian reports whether this machine stores numbers
// little-endian, as GGUF and safetensors data are.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// ggufQuantize quantizes whole rows of fs (rows of row elements) into out,
// split by rows among up to GOMAXPROCS goroutines. ggml's reference
// quantizers work block by block, so the split changes no bit.
func ggufQuantize(t ggml.Type, fs []float32, out []byte, row int64) error {
	rows := int64(len(fs)) / row
	p := min(int64(runtime.GOMAXPROCS(0)), rows)
	if p <= 1 || len(fs) < 1<<16 {
		return ggml.Quantize(t, fs, out)
	}
	per := (rows + p - 1) / p
	errs := make([]error, p)
	var wg sync.WaitGroup
	for w := range p {
		r0, r1 := w*per, min(rows, (w+1)*per)
		if r0 >= r1 {
			break
		}
		o0, err0 := t.RowBytes(r0 * row)
		o1, err1 := t.RowBytes(r1 * row)
		if err := errors.Join(err0, err1); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = ggml.Quantize(t, fs[r0*row:r1*row], out[o0:o1])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
