package statedict

import (
	"io"

	"github.com/ckpt-dev/ckpt/dtype"
)

// NewDerivedTensor returns a contiguous tensor whose bytes (little-endian,
// C order, size bytes) r serves: a tensor computed from others (convert's
// --quantize writes its codes and scales through such tensors), stored
// under key with the location and file of like, which it stands beside.
// Tensor.Open, ReadAll and Storage.ReaderAt read it as any other.
func NewDerivedTensor(name string, dt dtype.DType, shape []int64, r io.ReaderAt, size int64, like *Tensor) *Tensor {
	s := &Storage{Key: name, DType: dt, NBytes: size, src: derivedSource{r, size}}
	if like != nil && like.Storage != nil {
		s.Location, s.Record, s.File = like.Storage.Location, like.Storage.Record, like.Storage.File
	}
	t := &Tensor{Name: name, DType: dt, Shape: shape, Strides: contiguousStrides(shape), Storage: s, Layout: Strided}
	if like != nil {
		t.Device = like.Device
	}
	return t
}

type derivedSource struct {
	r    io.ReaderAt
	size int64
}

func (d derivedSource) open(off, n int64) (io.ReadCloser, error) {
	return io.NopCloser(io.NewSectionReader(d.r, off, n)), nil
}

func (d derivedSource) readerAt() (io.ReaderAt, error) { return d.r, nil }

// Derived reports whether s holds bytes computed from other tensors
// (NewDerivedTensor), not read from its file: no digest or CRC the file
// records is about them.
func (s *Storage) Derived() bool {
	_, ok := s.src.(derivedSource)
	return ok
}
