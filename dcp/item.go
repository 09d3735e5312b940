package dcp

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/torchzip"
)

// TensorSpec describes one tensor item: a contiguous CPU tensor of DType
// and Shape (a whole tensor or one chunk of one).
type TensorSpec struct {
	DType        dtype.DType
	Shape        []int64
	RequiresGrad bool
}

// NBytes is the size of the tensor's data.
func (s TensorSpec) NBytes() int64 {
	n := int64(1)
	for _, d := range s.Shape {
		n *= d
	}
	if pb := s.DType.PerByte(); pb > 1 {
		return (n + pb - 1) / pb
	}
	return n * int64(s.DType.Size())
}

func (s TensorSpec) pickle() ([]byte, error) {
	return torchzip.EncodeTree(s.Ref("0"))
}

// Ref returns the tensor s, contiguous on the CPU, over a storage of its
// own keyed key ("0": record data/0), for an object tree WriteValue writes.
func (s TensorSpec) Ref(key string) *torchzip.TensorRef {
	strides := make([]int64, len(s.Shape))
	st := int64(1)
	for d := len(s.Shape) - 1; d >= 0; d-- {
		strides[d] = st
		st *= max(s.Shape[d], 1)
	}
	numel := int64(1)
	for _, d := range s.Shape {
		numel *= d
	}
	return &torchzip.TensorRef{
		Storage:      &torchzip.StorageRef{Key: key, DType: s.DType, Location: "cpu", NumEl: numel},
		Shape:        s.Shape,
		Strides:      strides,
		RequiresGrad: s.RequiresGrad,
	}
}

// countWriter counts what passes; with discard set it keeps nothing.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	var n int
	var err error
	if c.w == nil {
		n = len(p)
	} else {
		n, err = c.w.Write(p)
	}
	c.n += int64(n)
	return n, err
}

// ReadFrom lets the destination read straight into its own buffers when
// it can (convert's output file does).
func (c *countWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	var err error
	if rf, ok := c.w.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.CopyBuffer(struct{ io.Writer }{c}, r, make([]byte, 1<<20))
		c.n -= n // counted by Write already
	}
	c.n += n
	return n, err
}

// WriteTensor writes one tensor item to w, the torch.save zip of the
// tensor s whose data, s.NBytes() bytes in C order, little-endian, it
// copies from data, and returns the item's length. bufSize is the copy
// buffer's size (0: torchzip's default).
func WriteTensor(w io.Writer, s TensorSpec, data io.Reader, bufSize int) (int64, error) {
	pkl, err := s.pickle()
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	var opts []torchzip.Option
	if bufSize > 0 {
		opts = append(opts, torchzip.WithBufferSize(bufSize))
	}
	zw := torchzip.NewWriter(cw, opts...)
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		return cw.n, err
	}
	if err := zw.WriteRecord("byteorder", 6, bytes.NewReader([]byte("little"))); err != nil {
		return cw.n, err
	}
	if err := zw.WriteRecord("data/0", s.NBytes(), data); err != nil {
		return cw.n, err
	}
	err = zw.Close()
	return cw.n, err
}

// zeros is a reader of endless bytes that does not fill its buffer: for
// measuring lengths, where the bytes themselves are never kept.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { return len(p), nil }

// TensorLength returns the length WriteTensor writes for s, without its
// data: it depends only on the dtype, the shape and the flags. The
// measure passes s.NBytes() bytes of nothing through the zip writer's
// CRC (several GB/s), and keeps none of them.
func TensorLength(s TensorSpec) (int64, error) {
	return WriteTensor(nil, s, io.LimitReader(zeros{}, s.NBytes()), 1<<20)
}

// WriteValue writes one non-tensor item to w, the torch.save zip of v (a
// value torchzip.EncodeTree writes: nil, bool, int64, *big.Int, float64,
// string, []byte, containers of them), and returns its length.
func WriteValue(w io.Writer, v any) (int64, error) {
	return WriteValueTensors(w, v, nil, nil, 4096)
}

// WriteValueTensors writes one non-tensor item whose object tree v also
// holds tensors (a tuple of tensors, which torch's planner saves whole):
// v's tensors are tensors[i].Ref(strconv.Itoa(i)), and tensor i's data,
// tensors[i].NBytes() bytes in C order, little-endian, is read from
// data(i), after data.pkl and byteorder, as records data/0, data/1, ...
// bufSize is the copy buffer's size (0: torchzip's default).
func WriteValueTensors(w io.Writer, v any, tensors []TensorSpec, data func(i int) (io.Reader, error), bufSize int) (int64, error) {
	pkl, err := torchzip.EncodeTree(v)
	if err != nil {
		return 0, fmt.Errorf("dcp: value: %w", err)
	}
	cw := &countWriter{w: w}
	var opts []torchzip.Option
	if bufSize > 0 {
		opts = append(opts, torchzip.WithBufferSize(bufSize))
	}
	zw := torchzip.NewWriter(cw, opts...)
	if err := zw.WriteRecord("data.pkl", int64(len(pkl)), bytes.NewReader(pkl)); err != nil {
		return cw.n, err
	}
	if err := zw.WriteRecord("byteorder", 6, bytes.NewReader([]byte("little"))); err != nil {
		return cw.n, err
	}
	for i, s := range tensors {
		r, err := data(i)
		if err != nil {
			return cw.n, err
		}
		if err := zw.WriteRecord("data/"+strconv.Itoa(i), s.NBytes(), r); err != nil {
			return cw.n, err
		}
	}
	err = zw.Close()
	return cw.n, err
}

// ValueLength returns the length WriteValue writes for v.
func ValueLength(v any) (int64, error) { return WriteValue(nil, v) }

// ValueTensorsLength returns the length WriteValueTensors writes for v
// and its tensors, without their data (see TensorLength).
func ValueTensorsLength(v any, tensors []TensorSpec) (int64, error) {
	return WriteValueTensors(nil, v, tensors, func(i int) (io.Reader, error) {
		return io.LimitReader(zeros{}, tensors[i].NBytes()), nil
	}, 1<<20)
}
