package ckpt

import (
	"fmt"
	"unsafe"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/devicecopy"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/remap"
	"github.com/ckpt-dev/ckpt/statedict"
)

// Tensor is one tensor of a Model: where it was saved, where it went, its
// layout, and its data (host bytes or a device pointer).
type Tensor struct {
	Name    string
	Saved   string       // location tag as saved ("cpu" when the file has none)
	Device  remap.Device // where it was loaded (its plan target)
	DType   dtype.DType
	Shape   []int64
	Strides []int64 // in elements
	Offset  int64   // storage offset in elements
	NBytes  int64   // bytes of its logical elements
	// Source is the tensor as read from the checkpoint (storage, flags,
	// quantization).
	Source *statedict.Tensor

	host *devicecopy.HostTensor
	dev  *devicecopy.DeviceTensor
	m    *Model
}

// OnHost reports whether the tensor's bytes are in host memory.
func (t *Tensor) OnHost() bool { return t.host != nil }

// DevicePtr returns the tensor's first element in GPU memory (its storage
// base plus its offset), and false when it is not on a GPU. The pointer is
// valid until the Model is closed; the layout is Shape, Strides, DType.
func (t *Tensor) DevicePtr() (cuda.DevicePtr, bool) {
	if t.dev == nil || t.m.isClosed() {
		return 0, false
	}
	return t.dev.Ptr, true
}

// Bytes returns the tensor's logical elements in C order, little-endian:
// what torch holds after tensor.contiguous(). For a contiguous tensor of a
// little-endian storage it shares the loaded memory (zero-copy: do not
// modify it); otherwise it is a copy (gathered, or byte-swapped from a
// big-endian file). A tensor not in host memory is ErrNotOnHost.
func (t *Tensor) Bytes() ([]byte, error) {
	if t.m != nil && t.m.isClosed() {
		return nil, fmt.Errorf("%w (tensor %q)", ErrClosed, t.Name)
	}
	if t.host == nil {
		return nil, fmt.Errorf("%w: tensor %q is on %s", ErrNotOnHost, t.Name, t.Device)
	}
	return t.host.Bytes()
}

// Element is a Go type a tensor can be viewed as. The dtypes each accepts:
//
//	float32: float32           float64: float64
//	uint16: bfloat16, float16, uint16 (raw bits for the 16-bit floats)
//	int8, int16, int32, int64: the same torch integer types
//	uint8: uint8, bool, the float8 types and float4_e2m1fn_x2 (raw bits: one
//	byte per torch element, two fp4 values in it); uint32, uint64: the same
//	complex64: complex64       complex128: complex128
type Element interface {
	float32 | float64 | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | complex64 | complex128
}

// accepts returns the Go name of T and whether a tensor of dtype d can be
// viewed as []T.
func accepts[T Element](d dtype.DType) (string, bool) {
	var zero T
	switch any(zero).(type) {
	case float32:
		return "float32", d == dtype.Float32
	case float64:
		return "float64", d == dtype.Float64
	case uint16:
		return "uint16", d == dtype.BFloat16 || d == dtype.Float16 || d == dtype.Uint16
	case int8:
		return "int8", d == dtype.Int8
	case int16:
		return "int16", d == dtype.Int16
	case int32:
		return "int32", d == dtype.Int32
	case int64:
		return "int64", d == dtype.Int64
	case uint8:
		switch d {
		case dtype.Uint8, dtype.Bool, dtype.Float8E5M2, dtype.Float8E4M3FN,
			dtype.Float8E5M2FNUZ, dtype.Float8E4M3FNUZ, dtype.Float8E8M0FNU,
			dtype.Float4E2M1FNx2:
			return "uint8", true
		}
		return "uint8", false
	case uint32:
		return "uint32", d == dtype.Uint32
	case uint64:
		return "uint64", d == dtype.Uint64
	case complex64:
		return "complex64", d == dtype.Complex64
	case complex128:
		return "complex128", d == dtype.Complex128
	}
	return fmt.Sprintf("%T", zero), false
}

// View returns the tensor's elements as a []T sharing the loaded host
// memory (zero-copy: do not modify it; it is valid until the Model is
// closed). bfloat16 and float16 are viewed as []uint16 of their raw bits.
//
// It returns a *ViewError, never panics: ErrDType when the dtype does not
// match T (see Element), ErrByteOrder for a multi-byte dtype whose bytes
// are big-endian in memory (use Tensor.Bytes for a swapped copy),
// ErrNotContiguous for a strided view (use Tensor.Bytes for a gathered
// copy), ErrNotOnHost for a tensor on a GPU or not loaded.
func View[T Element](t *Tensor) ([]T, error) {
	name, ok := accepts[T](t.DType)
	fail := func(err error) ([]T, error) {
		return nil, &ViewError{Tensor: t.Name, DType: t.DType, Want: name, Err: err}
	}
	if !ok {
		return fail(ErrDType)
	}
	if t.m != nil && t.m.isClosed() {
		return fail(ErrClosed)
	}
	if t.host == nil {
		return fail(ErrNotOnHost)
	}
	size := int(unsafe.Sizeof(*new(T)))
	if size > 1 && t.host.Storage.Storage.BigEndian {
		return fail(ErrByteOrder)
	}
	if !t.Source.IsContiguous() {
		return fail(ErrNotContiguous)
	}
	b, err := t.host.Bytes()
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return []T{}, nil
	}
	if len(b)%size != 0 {
		return fail(ErrNotContiguous)
	}
	if uintptr(unsafe.Pointer(&b[0]))%unsafe.Alignof(*new(T)) != 0 {
		// Go's allocator aligns the loaded storages; a copy all the same
		// rather than a misaligned slice.
		out := make([]T, len(b)/size)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
		return out, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size), nil
}
