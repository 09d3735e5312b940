package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/ckpt-dev/ckpt/ggml"
)

// ErrWrite reports a misuse of Writer: a value of the wrong Go type for
// its ValueType, a tensor written with the wrong number of bytes, tensors
// written out of order or left unwritten.
var ErrWrite = errors.New("gguf: write")

// TensorSpec is a tensor to write: name, sizes in ggml's order
// (fastest-varying first, the reverse of PyTorch's shape) and type.
type TensorSpec struct {
	Name string
	Dims []uint64
	Type ggml.Type
}

// Writer writes a GGUF version 3 file, little-endian, in one pass: the
// header, metadata and tensor infos when it is made, then each tensor's
// data in the order the specs were given, each at an offset aligned to
// general.alignment (DefaultAlignment when the metadata does not set it),
// zero-padded as the specification says.
type Writer struct {
	w       *bufio.Writer
	infos   []TensorInfo
	next    int
	pos     int64 // bytes written
	align   int64
	dataOff int64
}

// NewWriter writes the header, metadata and tensor infos to w and returns a
// Writer for the tensor data. Keys must be unique and values of the Go type
// their ValueType names (see KV); tensor names unique; dims at most
// MaxDims with the first a multiple of the type's block size.
func NewWriter(w io.Writer, kvs []KV, tensors []TensorSpec) (*Writer, error) {
	wr := &Writer{w: bufio.NewWriterSize(w, 1<<20), align: DefaultAlignment}
	keys := map[string]bool{}
	for _, kv := range kvs {
		if keys[kv.Key] {
			return nil, fmt.Errorf("%w: duplicate metadata key %q", ErrWrite, kv.Key)
		}
		keys[kv.Key] = true
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("%w: general.alignment must be a uint32 power of two, not %v", ErrWrite, kv.Value)
			}
			wr.align = int64(a)
		}
	}
	names := map[string]bool{}
	var off int64
	for _, t := range tensors {
		if names[t.Name] {
			return nil, fmt.Errorf("%w: duplicate tensor name %q", ErrWrite, t.Name)
		}
		names[t.Name] = true
		if len(t.Dims) > MaxDims {
			return nil, fmt.Errorf("%w: tensor %q has %d dimensions (at most %d)", ErrWrite, t.Name, len(t.Dims), MaxDims)
		}
		info := TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type, Offset: uint64(off)}
		row, rows := int64(1), int64(1)
		if len(t.Dims) > 0 {
			row = int64(t.Dims[0])
			for _, d := range t.Dims[1:] {
				rows *= int64(d)
			}
		}
		rb, err := t.Type.RowBytes(row)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %v", ErrWrite, t.Name, err)
		}
		info.Size = rb * rows
		wr.infos = append(wr.infos, info)
		off += (info.Size + wr.align - 1) / wr.align * wr.align
	}
	wr.raw([]byte(Magic))
	wr.u32(3)
	wr.u64(uint64(len(tensors)))
	wr.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		wr.str(kv.Key)
		wr.u32(uint32(kv.Type))
		if err := wr.value(kv.Type, kv.Value); err != nil {
			return nil, fmt.Errorf("%w: metadata key %q: %v", ErrWrite, kv.Key, err)
		}
	}
	for _, t := range wr.infos {
		wr.str(t.Name)
		wr.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			wr.u64(d)
		}
		wr.u32(uint32(t.Type))
		wr.u64(t.Offset)
	}
	wr.pad()
	wr.dataOff = wr.pos
	return wr, nil
}

// DataOffset returns where the data section starts.
func (w *Writer) DataOffset() int64 { return w.dataOff }

// Tensors returns the tensor infos as written, with offsets and sizes.
func (w *Writer) Tensors() []TensorInfo { return w.infos }

// WriteTensor writes the data of the next tensor: exactly its Size bytes
// from r, then the padding to the next aligned offset.
func (w *Writer) WriteTensor(r io.Reader) error {
	if w.next >= len(w.infos) {
		return fmt.Errorf("%w: more tensors written than declared", ErrWrite)
	}
	t := w.infos[w.next]
	n, err := io.CopyN(w.w, r, t.Size)
	w.pos += n
	if err != nil {
		if err == io.EOF {
			return fmt.Errorf("%w: tensor %q: %d bytes given, %d needed", ErrWrite, t.Name, n, t.Size)
		}
		return err
	}
	w.next++
	if w.next < len(w.infos) {
		w.pad()
	}
	return nil
}

// Close flushes the file. It fails if a declared tensor was not written.
func (w *Writer) Close() error {
	if w.next != len(w.infos) {
		return fmt.Errorf("%w: %d of %d tensors written", ErrWrite, w.next, len(w.infos))
	}
	return w.w.Flush()
}

func (w *Writer) raw(b []byte) {
	w.w.Write(b)
	w.pos += int64(len(b))
}

func (w *Writer) u32(v uint32) { w.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (w *Writer) u64(v uint64) { w.raw(binary.LittleEndian.AppendUint64(nil, v)) }
func (w *Writer) str(s string) { w.u64(uint64(len(s))); w.raw([]byte(s)) }

func (w *Writer) pad() {
	if r := w.pos % w.align; r != 0 {
		w.raw(make([]byte, w.align-r))
	}
}

func (w *Writer) value(t ValueType, v any) error {
	switch t {
	case TypeString:
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("a string value is a %T", v)
		}
		w.str(s)
		return nil
	case TypeArray:
		a, ok := v.(*Array)
		if !ok {
			return fmt.Errorf("an array value is a %T", v)
		}
		w.u32(uint32(a.Elem))
		n := a.Len()
		w.u64(uint64(n))
		if n > 0 && a.Index(0) == nil {
			return fmt.Errorf("array values are a %T", a.Values)
		}
		for i := 0; i < n; i++ {
			if err := w.value(a.Elem, a.Index(i)); err != nil {
				return err
			}
		}
		return nil
	}
	b, err := encodeScalar(t, v)
	if err != nil {
		return err
	}
	w.raw(b)
	return nil
}

func encodeScalar(t ValueType, v any) ([]byte, error) {
	le := binary.LittleEndian
	ok := true
	var b []byte
	switch t {
	case TypeUint8:
		x, k := v.(uint8)
		b, ok = []byte{x}, k
	case TypeInt8:
		x, k := v.(int8)
		b, ok = []byte{byte(x)}, k
	case TypeBool:
		x, k := v.(bool)
		b, ok = []byte{0}, k
		if x {
			b[0] = 1
		}
	case TypeUint16:
		x, k := v.(uint16)
		b, ok = le.AppendUint16(nil, x), k
	case TypeInt16:
		x, k := v.(int16)
		b, ok = le.AppendUint16(nil, uint16(x)), k
	case TypeUint32:
		x, k := v.(uint32)
		b, ok = le.AppendUint32(nil, x), k
	case TypeInt32:
		x, k := v.(int32)
		b, ok = le.AppendUint32(nil, uint32(x)), k
	case TypeFloat32:
		x, k := v.(float32)
		b, ok = le.AppendUint32(nil, math.Float32bits(x)), k
	case TypeUint64:
		x, k := v.(uint64)
		b, ok = le.AppendUint64(nil, x), k
	case TypeInt64:
		x, k := v.(int64)
		b, ok = le.AppendUint64(nil, uint64(x)), k
	case TypeFloat64:
		x, k := v.(float64)
		b, ok = le.AppendUint64(nil, math.Float64bits(x)), k
	default:
		return nil, fmt.Errorf("unknown value type %d", uint32(t))
	}
	if !ok {
		return nil, fmt.Errorf("a %s value is a %T", t, v)
	}
	return b, nil
}
