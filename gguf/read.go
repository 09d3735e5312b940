package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"unicode/utf8"

	"github.com/ckpt-dev/ckpt/ggml"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the alignment of tensor data when general.alignment
// does not say.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// Limits bound what Parse accepts, so that a hostile file cannot make it
// allocate or loop without end. Zero fields take the defaults.
type Limits struct {
	MaxTensors       int64 // tensor infos (default 1<<20)
	MaxKV            int64 // metadata entries (default 1<<20)
	MaxStringLen     int64 // bytes of one string (default 64 MiB)
	MaxArrayLen      int64 // elements of one array (default 1<<26)
	MaxNesting       int   // arrays of arrays (default 8)
	MaxMetadataBytes int64 // memory all metadata values and names may take (default 1 GiB)
}

// DefaultLimits are the limits of a Parse without options.
func DefaultLimits() Limits {
	return Limits{MaxTensors: 1 << 20, MaxKV: 1 << 20, MaxStringLen: 64 << 20, MaxArrayLen: 1 << 26, MaxNesting: 8, MaxMetadataBytes: 1 << 30}
}

func (l Limits) orDefault() Limits {
	d := DefaultLimits()
	if l.MaxTensors > 0 {
		d.MaxTensors = l.MaxTensors
	}
	if l.MaxKV > 0 {
		d.MaxKV = l.MaxKV
	}
	if l.MaxStringLen > 0 {
		d.MaxStringLen = l.MaxStringLen
	}
	if l.MaxArrayLen > 0 {
		d.MaxArrayLen = l.MaxArrayLen
	}
	if l.MaxNesting > 0 {
		d.MaxNesting = l.MaxNesting
	}
	if l.MaxMetadataBytes > 0 {
		d.MaxMetadataBytes = l.MaxMetadataBytes
	}
	return d
}

// Option configures Parse.
type Option func(*Limits)

// WithLimits replaces the default limits (zero fields keep their default).
func WithLimits(l Limits) Option { return func(d *Limits) { *d = l.orDefault() } }

// File is a parsed GGUF file: header, metadata and tensor infos. Tensor
// data is not read.
//
// Its JSON form (ckpt inspect --json's "gguf") has the version, byte
// order, alignment, data offset and every metadata entry; tensor infos are
// left to the tensors they describe.
type File struct {
	Version   uint32       `json:"version"`
	BigEndian bool         `json:"big_endian"`
	KV        []KV         `json:"metadata"`
	Tensors   []TensorInfo `json:"-"`
	// Alignment is general.alignment, or DefaultAlignment.
	Alignment int64 `json:"alignment"`
	// DataOffset is where the data section starts: tensor offsets count
	// from here.
	DataOffset int64 `json:"data_offset"`
}

// ByteOrder returns the file's byte order.
func (f *File) ByteOrder() binary.ByteOrder {
	if f.BigEndian {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// Get returns the metadata entry key.
func (f *File) Get(key string) (KV, bool) { return Lookup(f.KV, key) }

// Lookup returns the entry key of kvs.
func Lookup(kvs []KV, key string) (KV, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv, true
		}
	}
	return KV{}, false
}

// TensorInfo describes one tensor.
type TensorInfo struct {
	Name string
	// Dims are the sizes in ggml's order, fastest-varying first: a
	// PyTorch weight of shape [out, in] has Dims [in, out]. Shape gives
	// PyTorch's order.
	Dims   []uint64
	Type   ggml.Type
	Offset uint64 // from File.DataOffset
	Size   int64  // bytes of data
}

// Shape returns the sizes in PyTorch's order (slowest first): Dims reversed.
func (t TensorInfo) Shape() []int64 {
	s := make([]int64, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int64(d)
	}
	return s
}

// NumEl returns the number of elements.
func (t TensorInfo) NumEl() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Sniff reports whether head starts with the GGUF magic.
func Sniff(head []byte) bool { return len(head) >= 4 && string(head[:4]) == Magic }

// reader reads the sequential parts of the file with bounds.
type reader struct {
	br    *bufio.Reader
	off   int64
	size  int64
	order binary.ByteOrder
	v1    bool
	lim   Limits
	mem   int64 // metadata bytes kept so far
	key   string
	name  string
}

func (r *reader) fail(err error, format string, args ...any) error {
	return &FormatError{Offset: r.off, Key: r.key, Tensor: r.name, Msg: fmt.Sprintf(format, args...), Err: err}
}

func (r *reader) read(n int64) ([]byte, error) {
	if n > r.size-r.off {
		return nil, r.fail(ErrTruncated, "%d bytes needed, %d left in the file", n, r.size-r.off)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.br, b); err != nil {
		return nil, r.fail(ErrTruncated, "%v", err)
	}
	r.off += n
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.read(4)
	if err != nil {
		return 0, err
	}
	return r.order.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.read(8)
	if err != nil {
		return 0, err
	}
	return r.order.Uint64(b), nil
}

// count reads a count or length: 32 bits in version 1, 64 after.
func (r *reader) count() (uint64, error) {
	if r.v1 {
		n, err := r.u32()
		return uint64(n), err
	}
	return r.u64()
}

// charge accounts n bytes of metadata memory.
func (r *reader) charge(n int64) error {
	r.mem += n
	if r.mem > r.lim.MaxMetadataBytes {
		return r.fail(ErrLimit, "metadata takes more than %d bytes (Limits.MaxMetadataBytes)", r.lim.MaxMetadataBytes)
	}
	return nil
}

func (r *reader) str() (string, error) {
	n, err := r.count()
	if err != nil {
		return "", err
	}
	if n > uint64(r.lim.MaxStringLen) {
		return "", r.fail(ErrLimit, "a string of %d bytes (Limits.MaxStringLen is %d)", n, r.lim.MaxStringLen)
	}
	if err := r.charge(int64(n) + 16); err != nil {
		return "", err
	}
	b, err := r.read(int64(n))
	if err != nil {
		return "", err
	}
	if r.v1 && len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1] // version 1 writers counted a terminating NUL
	}
	return string(b), nil
}

// Parse reads the header, metadata and tensor infos of the GGUF file r
// holds (size bytes): versions 1 to 3, little- or big-endian. Every count
// and length is checked against the bytes left and the limits before
// anything is allocated; tensor infos are checked (known ggml type, at
// most MaxDims dimensions, the first a multiple of the type's block, the
// byte size within int64, offsets aligned, data inside the file, no two
// tensors overlapping, names and keys unique). Tensor data is not read.
func Parse(ra io.ReaderAt, size int64, opts ...Option) (*File, error) {
	lim := DefaultLimits()
	for _, o := range opts {
		o(&lim)
	}
	r := &reader{br: bufio.NewReaderSize(io.NewSectionReader(ra, 0, size), 64<<10), size: size, order: binary.LittleEndian, lim: lim}
	magic, err := r.read(4)
	if err != nil || string(magic) != Magic {
		return nil, &FormatError{Msg: "no GGUF magic", Err: ErrNotGGUF}
	}
	vb, err := r.read(4)
	if err != nil {
		return nil, err
	}
	f := &File{Version: binary.LittleEndian.Uint32(vb), Alignment: DefaultAlignment}
	if f.Version&0xffff == 0 && f.Version != 0 {
		// A big-endian file: its version reads as 0x03000000 here.
		f.Version, f.BigEndian, r.order = binary.BigEndian.Uint32(vb), true, binary.BigEndian
	}
	if f.Version < 1 || f.Version > 3 {
		return nil, &FormatError{Offset: 4, Msg: fmt.Sprintf("version %d (1 to 3 are read)", f.Version), Err: ErrVersion}
	}
	r.v1 = f.Version == 1
	nt, err := r.count()
	if err != nil {
		return nil, err
	}
	nkv, err := r.count()
	if err != nil {
		return nil, err
	}
	if nt > uint64(lim.MaxTensors) {
		return nil, r.fail(ErrLimit, "%d tensors (Limits.MaxTensors is %d)", nt, lim.MaxTensors)
	}
	if nkv > uint64(lim.MaxKV) {
		return nil, r.fail(ErrLimit, "%d metadata entries (Limits.MaxKV is %d)", nkv, lim.MaxKV)
	}
	// Each entry takes at least a length and a type: a count the file
	// cannot hold is refused before anything is allocated for it.
	if nkv > uint64(size-r.off)/12 || nt > uint64(size-r.off)/16 {
		return nil, r.fail(ErrTruncated, "%d metadata entries and %d tensors cannot fit in the %d bytes left", nkv, nt, size-r.off)
	}
	keys := make(map[string]bool, nkv)
	f.KV = make([]KV, 0, nkv)
	for i := uint64(0); i < nkv; i++ {
		r.key = ""
		k, err := r.str()
		if err != nil {
			return nil, err
		}
		r.key = k
		if keys[k] {
			return nil, r.fail(ErrMalformed, "duplicate metadata key")
		}
		keys[k] = true
		t, err := r.u32()
		if err != nil {
			return nil, err
		}
		v, err := r.value(ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		f.KV = append(f.KV, KV{Key: k, Type: ValueType(t), Value: v})
	}
	r.key = ""
	if kv, ok := f.Get("general.alignment"); ok {
		a, isU32 := kv.Value.(uint32)
		if !isU32 || a == 0 || a&(a-1) != 0 {
			return nil, &FormatError{Key: kv.Key, Msg: fmt.Sprintf("general.alignment is %s %v: a power of two of type uint32 is required", kv.Type, kv.Value), Err: ErrMalformed}
		}
		f.Alignment = int64(a)
	}
	names := make(map[string]bool, nt)
	f.Tensors = make([]TensorInfo, 0, nt)
	for i := uint64(0); i < nt; i++ {
		r.name = ""
		t, err := r.tensorInfo()
		if err != nil {
			return nil, err
		}
		if names[t.Name] {
			r.name = t.Name
			return nil, r.fail(ErrMalformed, "duplicate tensor name")
		}
		names[t.Name] = true
		f.Tensors = append(f.Tensors, t)
	}
	r.name = ""
	f.DataOffset = (r.off + f.Alignment - 1) / f.Alignment * f.Alignment
	if len(f.Tensors) > 0 && f.DataOffset > size {
		return nil, r.fail(ErrTruncated, "the data section would start at %d, past the end of the file", f.DataOffset)
	}
	if err := f.checkData(size); err != nil {
		return nil, err
	}
	return f, nil
}

func (r *reader) tensorInfo() (TensorInfo, error) {
	var t TensorInfo
	name, err := r.str()
	if err != nil {
		return t, err
	}
	t.Name, r.name = name, name
	if !utf8.ValidString(name) {
		return t, r.fail(ErrMalformed, "tensor name is not UTF-8")
	}
	nd, err := r.u32()
	if err != nil {
		return t, err
	}
	if nd > MaxDims {
		return t, r.fail(ErrMalformed, "%d dimensions (at most %d)", nd, MaxDims)
	}
	t.Dims = make([]uint64, nd)
	n := uint64(1)
	for j := range t.Dims {
		d, err := r.count()
		if err != nil {
			return t, err
		}
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 || d > math.MaxInt64 {
			return t, r.fail(ErrMalformed, "dimensions %v... overflow 64 bits", append(t.Dims[:j:j], d))
		}
		t.Dims[j], n = d, lo
	}
	typ, err := r.u32()
	if err != nil {
		return t, err
	}
	t.Type = ggml.Type(typ)
	if !t.Type.Known() {
		return t, r.fail(ErrMalformed, "ggml type %d is not one ggml defines (or has been removed)", typ)
	}
	if t.Offset, err = r.u64(); err != nil {
		return t, err
	}
	row := int64(1)
	if nd > 0 {
		row = int64(t.Dims[0])
	}
	rb, err := t.Type.RowBytes(row)
	if err != nil {
		return t, r.fail(ErrMalformed, "%v", err)
	}
	rows := int64(1)
	if nd > 0 && t.Dims[0] != 0 {
		rows = int64(n / t.Dims[0])
	} else if nd > 0 {
		rows = 0
	}
	hi, lo := bits.Mul64(uint64(rb), uint64(rows))
	if hi != 0 || lo > math.MaxInt64 {
		return t, r.fail(ErrMalformed, "%v elements of %s overflow 64 bits of bytes", t.Dims, t.Type)
	}
	t.Size = int64(lo)
	return t, nil
}

// value reads a value of type t.
func (r *reader) value(t ValueType, depth int) (any, error) {
	switch t {
	case TypeString:
		return r.str()
	case TypeArray:
		return r.array(depth + 1)
	}
	if !t.Known() {
		return nil, r.fail(ErrMalformed, "unknown value type %d", uint32(t))
	}
	b, err := r.read(t.size())
	if err != nil {
		return nil, err
	}
	return scalar(t, b, r.order)
}

func scalar(t ValueType, b []byte, o binary.ByteOrder) (any, error) {
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, fmt.Errorf("bool byte %d", b[0])
		}
		return b[0] == 1, nil
	case TypeUint16:
		return o.Uint16(b), nil
	case TypeInt16:
		return int16(o.Uint16(b)), nil
	case TypeUint32:
		return o.Uint32(b), nil
	case TypeInt32:
		return int32(o.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(o.Uint32(b)), nil
	case TypeUint64:
		return o.Uint64(b), nil
	case TypeInt64:
		return int64(o.Uint64(b)), nil
	case TypeFloat64:
		return math.Float64frombits(o.Uint64(b)), nil
	}
	return nil, fmt.Errorf("not a scalar type %s", t)
}

func (r *reader) array(depth int) (*Array, error) {
	if depth > r.lim.MaxNesting {
		return nil, r.fail(ErrLimit, "arrays nested deeper than %d (Limits.MaxNesting)", r.lim.MaxNesting)
	}
	et, err := r.u32()
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	if !elem.Known() {
		return nil, r.fail(ErrMalformed, "unknown array element type %d", et)
	}
	n, err := r.count()
	if err != nil {
		return nil, err
	}
	if n > uint64(r.lim.MaxArrayLen) {
		return nil, r.fail(ErrLimit, "an array of %d elements (Limits.MaxArrayLen is %d)", n, r.lim.MaxArrayLen)
	}
	// Every element takes at least one byte of the file (a string or an
	// array at least its length): no allocation beyond what the file holds.
	least := max(elem.size(), 4)
	if !r.v1 && (elem == TypeString || elem == TypeArray) {
		least = 8
	}
	if n > uint64((r.size-r.off)/least) {
		return nil, r.fail(ErrTruncated, "an array of %d %s elements cannot fit in the %d bytes left", n, elem, r.size-r.off)
	}
	if err := r.charge(int64(n) * max(elem.size(), 8)); err != nil {
		return nil, err
	}
	a := &Array{Elem: elem}
	switch elem {
	case TypeString:
		v := make([]string, n)
		for i := range v {
			if v[i], err = r.str(); err != nil {
				return nil, err
			}
		}
		a.Values = v
	case TypeArray:
		v := make([]*Array, n)
		for i := range v {
			if v[i], err = r.array(depth + 1); err != nil {
				return nil, err
			}
		}
		a.Values = v
	default:
		b, err := r.read(int64(n) * elem.size())
		if err != nil {
			return nil, err
		}
		if a.Values, err = scalars(elem, b, int(n), r.order); err != nil {
			return nil, r.fail(ErrMalformed, "%v", err)
		}
	}
	return a, nil
}

func scalars(t ValueType, b []byte, n int, o binary.ByteOrder) (any, error) {
	sz := int(t.size())
	switch t {
	case TypeUint8:
		return b, nil
	case TypeInt8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(b[i])
		}
		return v, nil
	case TypeBool:
		v := make([]bool, n)
		for i := range v {
			if b[i] > 1 {
				return nil, fmt.Errorf("bool byte %d in an array", b[i])
			}
			v[i] = b[i] == 1
		}
		return v, nil
	case TypeUint16, TypeInt16:
		u := make([]uint16, n)
		for i := range u {
			u[i] = o.Uint16(b[i*sz:])
		}
		if t == TypeUint16 {
			return u, nil
		}
		v := make([]int16, n)
		for i := range v {
			v[i] = int16(u[i])
		}
		return v, nil
	case TypeUint32, TypeInt32, TypeFloat32:
		switch t {
		case TypeUint32:
			v := make([]uint32, n)
			for i := range v {
				v[i] = o.Uint32(b[i*sz:])
			}
			return v, nil
		case TypeInt32:
			v := make([]int32, n)
			for i := range v {
				v[i] = int32(o.Uint32(b[i*sz:]))
			}
			return v, nil
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(o.Uint32(b[i*sz:]))
		}
		return v, nil
	case TypeUint64:
		v := make([]uint64, n)
		for i := range v {
			v[i] = o.Uint64(b[i*sz:])
		}
		return v, nil
	case TypeInt64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(o.Uint64(b[i*sz:]))
		}
		return v, nil
	case TypeFloat64:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(o.Uint64(b[i*sz:]))
		}
		return v, nil
	}
	return nil, fmt.Errorf("not a scalar type %s", t)
}

// checkData checks every tensor's data range: aligned, inside the file,
// and not overlapping another's.
func (f *File) checkData(size int64) error {
	type span struct {
		begin, end int64
		name       string
	}
	spans := make([]span, 0, len(f.Tensors))
	for _, t := range f.Tensors {
		fail := func(err error, format string, args ...any) error {
			return &FormatError{Offset: f.DataOffset, Tensor: t.Name, Msg: fmt.Sprintf(format, args...), Err: err}
		}
		if t.Offset%uint64(f.Alignment) != 0 {
			return fail(ErrMalformed, "data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
		}
		if t.Offset > uint64(size-f.DataOffset) || t.Size > size-f.DataOffset-int64(t.Offset) {
			return fail(ErrTruncated, "data [%d, +%d) runs past the end of the file (%d bytes of data section)", t.Offset, t.Size, size-f.DataOffset)
		}
		spans = append(spans, span{int64(t.Offset), int64(t.Offset) + t.Size, t.Name})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].begin < spans[j].begin })
	var last span // the span reaching furthest so far
	for _, sp := range spans {
		if sp.end == sp.begin {
			continue // no data
		}
		if sp.begin < last.end {
			return &FormatError{Offset: f.DataOffset + sp.begin, Tensor: sp.name,
				Msg: fmt.Sprintf("data overlaps tensor %q", last.name), Err: ErrMalformed}
		}
		if sp.end > last.end {
			last = sp
		}
	}
	return nil
}
