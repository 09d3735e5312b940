package statedict

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/ggml"
	"github.com/ckpt-dev/ckpt/gguf"
)

// GGML describes how a GGUF tensor is stored: its ggml type, sizes in
// ggml's order (fastest-varying first) and its bytes in the file. A
// tensor of a plain type (F32, F16, BF16, F64, I8 to I64) reads as those
// bytes; a quantized one (Q4_K, IQ2_XXS, ...) reads as its elements
// dequantized to float32 by ggml's reference rules (package ggml), so that
// every path into tensor data (load, convert, verify) sees numbers.
type GGML struct {
	Type   string   `json:"type"`   // ggml's name: "f16", "q4_K", "iq2_xxs"
	Dims   []uint64 `json:"dims"`   // ggml order; Tensor.Shape is PyTorch's (reversed)
	Offset int64    `json:"offset"` // of the data in the file
	NBytes int64    `json:"nbytes"` // stored bytes
}

// ggufDTypes maps the plain ggml types to torch dtypes.
var ggufDTypes = map[ggml.Type]dtype.DType{
	ggml.F32: dtype.Float32, ggml.F16: dtype.Float16, ggml.BF16: dtype.BFloat16, ggml.F64: dtype.Float64,
	ggml.I8: dtype.Int8, ggml.I16: dtype.Int16, ggml.I32: dtype.Int32, ggml.I64: dtype.Int64,
}

// GGMLDType returns the torch dtype of a plain ggml type (F32, F16, BF16,
// F64, I8 to I64): what its elements are read as, bit for bit.
func GGMLDType(t ggml.Type) (dtype.DType, bool) {
	d, ok := ggufDTypes[t]
	return d, ok
}

// DTypeGGML is GGMLDType's inverse: the plain ggml type of a dtype.
func DTypeGGML(d dtype.DType) (ggml.Type, bool) {
	for t, dt := range ggufDTypes {
		if dt == d {
			return t, true
		}
	}
	return 0, false
}

// readGGUF adapts a GGUF file: each tensor is a contiguous cpu tensor over
// a storage of its own, in PyTorch's order of sizes.
func readGGUF(r io.ReaderAt, size int64, cfg *config) (*Checkpoint, error) {
	f, err := gguf.Parse(r, size)
	if err != nil {
		return nil, &Error{Record: "header", Err: err}
	}
	ck := &Checkpoint{Format: FormatGGUF, ByteOrder: "little", Version: fmt.Sprint(f.Version), GGUF: f}
	if f.BigEndian {
		ck.ByteOrder = "big"
	}
	for i, ti := range f.Tensors {
		if i%1024 == 0 {
			if err := cfg.canceled(); err != nil {
				return nil, err
			}
		}
		shape := ti.Shape()
		off := f.DataOffset + int64(ti.Offset)
		g := &GGML{Type: ti.Type.String(), Dims: ti.Dims, Offset: off, NBytes: ti.Size}
		s := &Storage{Key: ti.Name, Location: "cpu", Record: "data", BigEndian: f.BigEndian}
		if dt, ok := ggufDTypes[ti.Type]; ok {
			s.DType, s.NBytes = dt, ti.Size
			s.src = &sectionSource{r: r, off: off, n: ti.Size}
		} else {
			n := ti.NumEl()
			if n > (1<<63-1)/4 {
				return nil, &Error{Record: "header", Tensor: ti.Name, Err: fmt.Errorf("%w: %d elements", ErrMalformed, n)}
			}
			s.DType, s.NBytes = dtype.Float32, n*4
			s.BigEndian = false // dequantized elements are produced little-endian
			s.src = &dequantSource{r: r, off: off, raw: ti.Size, typ: ti.Type, numel: n, bigEndian: f.BigEndian, name: ti.Name}
		}
		t := &Tensor{Name: ti.Name, DType: s.DType, Shape: shape, Strides: contiguousStrides(shape),
			Device: "cpu", Storage: s, Layout: Strided, GGML: g}
		ck.Tensors = append(ck.Tensors, t)
		ck.Storages = append(ck.Storages, s)
	}
	return ck, nil
}

// dequantSource serves a quantized tensor's elements as little-endian
// float32, decoding whole blocks read from [off, off+raw) of r.
type dequantSource struct {
	r         io.ReaderAt
	off, raw  int64
	typ       ggml.Type
	numel     int64
	bigEndian bool
	name      string
}

// dequantChunk is how many blocks one read decodes (a few MiB of output).
const dequantChunk = 1 << 14

func (s *dequantSource) check() error {
	if s.bigEndian {
		return fmt.Errorf("%w: tensor %s is %s in a big-endian GGUF file: ckpt dequantizes little-endian block data only", ErrUnsupported, s.name, s.typ)
	}
	return nil
}

func (s *dequantSource) open(off, n int64) (io.ReadCloser, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return io.NopCloser(io.NewSectionReader(s, off, n)), nil
}

func (s *dequantSource) readerAt() (io.ReaderAt, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// ReadAt fills p with the dequantized bytes at logical offset off.
func (s *dequantSource) ReadAt(p []byte, off int64) (int, error) {
	total := s.numel * 4
	if off < 0 {
		return 0, fmt.Errorf("negative offset")
	}
	if off >= total {
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > total-off {
		p = p[:total-off]
	}
	bs, ts := s.typ.BlockSize(), s.typ.TypeSize()
	blockBytes := bs * 4 // logical bytes of one block
	raw := make([]byte, min(dequantChunk, (int64(len(p))+2*blockBytes)/blockBytes)*ts)
	out := make([]float32, int64(len(raw))/ts*bs)
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		first := pos / blockBytes
		nb := min(int64(len(raw))/ts, (pos+int64(len(p)-done)+blockBytes-1)/blockBytes-first)
		rb := raw[:nb*ts]
		if _, err := s.r.ReadAt(rb, s.off+first*ts); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
		fs := out[:nb*bs]
		if err := ggml.Dequantize(s.typ, rb, fs); err != nil {
			return done, err
		}
		done += copy(p[done:], floatBytes(fs)[pos-first*blockBytes:])
	}
	if done < want {
		return done, io.EOF
	}
	return done, nil
}

var littleEndianHost = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// floatBytes returns fs as little-endian bytes: the same memory on a
// little-endian machine, a converted copy elsewhere.
func floatBytes(fs []float32) []byte {
	if len(fs) == 0 {
		return nil
	}
	if littleEndianHost {
		return unsafe.Slice((*byte)(unsafe.Pointer(&fs[0])), len(fs)*4)
	}
	b := make([]byte, len(fs)*4)
	for i, f := range fs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// GGMLRaw returns a GGUF tensor's stored bytes: for a quantized type its
// blocks as the file holds them, for a plain type its elements in the
// file's byte order. Converting GGUF to GGUF copies blocks through it
// bit for bit instead of dequantizing and quantizing again.
func (t *Tensor) GGMLRaw() (io.Reader, error) {
	if t.GGML == nil || t.Storage == nil {
		return nil, &Error{Tensor: t.Name, Err: fmt.Errorf("%w: not a GGUF tensor", ErrUnsupported)}
	}
	var r io.ReaderAt
	switch s := t.Storage.src.(type) {
	case *dequantSource:
		r = s.r
	case *sectionSource:
		r = s.r
	default:
		return nil, &Error{Tensor: t.Name, Err: ErrNoData}
	}
	return io.NewSectionReader(r, t.GGML.Offset, t.GGML.NBytes), nil
}
