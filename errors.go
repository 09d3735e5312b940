package ckpt

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/human"

	"github.com/ckpt-dev/ckpt/remap"
)

// Sentinel errors of the package. Errors of the packages underneath pass
// through unchanged in meaning (wrapped), so errors.Is also matches
// pickle.ErrUnsafe, devicecopy.ErrCRC, devicecopy.ErrPreflight,
// devicecopy.ErrVerify, remap.ErrSyntax and the others.
var (
	// ErrUnsupportedSource reports a source Open cannot read: an empty
	// string or a URL scheme without a reader. See *SourceError.
	ErrUnsupportedSource = errors.New("ckpt: unsupported source")
	// ErrStray reports tensors saved on another device than the rest of
	// the checkpoint, refused because of WithStrict. See *StrayError.
	ErrStray = errors.New("ckpt: stray tensors")
	// ErrDType reports a typed view of a tensor whose dtype does not match
	// the Go element type. See *ViewError.
	ErrDType = errors.New("ckpt: dtype does not match the view")
	// ErrByteOrder reports a typed view of a tensor whose bytes are
	// big-endian in memory (a checkpoint saved on a big-endian machine);
	// Tensor.Bytes returns them swapped, as a copy.
	ErrByteOrder = errors.New("ckpt: tensor bytes are big-endian")
	// ErrNotContiguous reports a typed view of a tensor whose elements are
	// not one contiguous run of its storage; Tensor.Bytes returns them
	// gathered, as a copy.
	ErrNotContiguous = errors.New("ckpt: tensor is not contiguous")
	// ErrNotOnHost reports host data asked of a tensor that is on a GPU,
	// was filtered out, or was not loaded (dry run, meta tensor).
	ErrNotOnHost = errors.New("ckpt: tensor is not in host memory")
	// ErrClosed reports use of a Model after Close.
	ErrClosed = errors.New("ckpt: model is closed")
)

// SourceError reports a source with a URL scheme that no reader handles.
// It matches ErrUnsupportedSource.
type SourceError struct {
	Source string // the source as given
	Scheme string // its scheme, lowercase
}

// Error names the scheme and what is supported.
func (e *SourceError) Error() string {
	return fmt.Sprintf("ckpt: unsupported URL scheme %q in %q (supported: local files and directories)", e.Scheme, e.Source)
}

// Unwrap returns ErrUnsupportedSource.
func (e *SourceError) Unwrap() error { return ErrUnsupportedSource }

// StrayError lists the stray tensors that WithStrict refused. It matches
// ErrStray.
type StrayError struct {
	Strays []remap.Stray
}

// Error names every stray with its saved device and size, and the
// checkpoint's home device.
func (e *StrayError) Error() string {
	parts := make([]string, len(e.Strays))
	for i, st := range e.Strays {
		parts[i] = fmt.Sprintf("%q (%s, %s)", st.Name, st.Tag, human.Bytes(st.NBytes))
	}
	noun := "tensors were"
	if len(e.Strays) == 1 {
		noun = "tensor was"
	}
	dom := ""
	if len(e.Strays) > 0 {
		dom = e.Strays[0].Dominant
	}
	return fmt.Sprintf("%d %s saved on another device than the rest of the checkpoint (%s): %s",
		len(e.Strays), noun, dom, strings.Join(parts, ", "))
}

// Unwrap returns ErrStray.
func (e *StrayError) Unwrap() error { return ErrStray }

// ViewError reports a typed view that cannot be made of a tensor. It
// matches ErrDType, ErrByteOrder, ErrNotContiguous or ErrNotOnHost.
type ViewError struct {
	Tensor string      // the tensor's name
	DType  dtype.DType // its dtype
	Want   string      // the Go element type asked for, e.g. "float32"
	Err    error       // the sentinel
}

// Error names the tensor, its dtype and the view asked for.
func (e *ViewError) Error() string {
	return fmt.Sprintf("%v: tensor %q (%s) as []%s", e.Err, e.Tensor, e.DType, e.Want)
}

// Unwrap returns the sentinel.
func (e *ViewError) Unwrap() error { return e.Err }
