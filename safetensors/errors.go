package safetensors

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error this package detects matches one of them with
// errors.Is, and errors about one tensor are also a *HeaderError naming it;
// errors of the underlying io.ReaderAt, io.Reader or io.Writer are wrapped
// and match those instead.
var (
	// ErrTruncated reports a file shorter than its header length or its
	// data offsets require.
	ErrTruncated = errors.New("safetensors: file truncated")
	// ErrHeaderTooLarge reports a header length above the limit
	// (100,000,000 bytes unless WithMaxHeaderSize says otherwise).
	ErrHeaderTooLarge = errors.New("safetensors: header too large")
	// ErrTooManyTensors: the header declares more tensors than the limit
	// (WithMaxTensors).
	ErrTooManyTensors = errors.New("safetensors: too many tensors")
	// ErrInvalidHeader reports a header that is not valid UTF-8, not a JSON
	// object of the expected form, or has a malformed entry.
	ErrInvalidHeader = errors.New("safetensors: invalid header")
	// ErrUnknownDType reports a dtype code the format does not define.
	ErrUnknownDType = errors.New("safetensors: unknown dtype")
	// ErrDuplicate reports a name (tensor, metadata key or entry field)
	// that appears twice.
	ErrDuplicate = errors.New("safetensors: duplicate name")
	// ErrInvalidOffsets reports data offsets that, sorted, do not tile the
	// data buffer from 0 without holes or overlaps.
	ErrInvalidOffsets = errors.New("safetensors: invalid data offsets")
	// ErrOverflow reports a shape whose element or byte count overflows
	// 64 bits.
	ErrOverflow = errors.New("safetensors: size overflow")
	// ErrSizeMismatch reports a tensor whose byte range does not equal its
	// element count times its element width, or whose bit size is not a
	// whole number of bytes.
	ErrSizeMismatch = errors.New("safetensors: tensor size mismatch")
	// ErrTrailingData reports bytes after the end of the last tensor.
	ErrTrailingData = errors.New("safetensors: trailing data after tensors")
	// ErrInvalidTensor reports a tensor given to the writer whose name is
	// "__metadata__" or not valid UTF-8, or that has a negative dimension.
	ErrInvalidTensor = errors.New("safetensors: invalid tensor")
	// ErrOrder reports a WriteTensor call for a tensor other than the next
	// one in Writer.Order.
	ErrOrder = errors.New("safetensors: tensor written out of order")
	// ErrDataLength reports tensor data shorter or longer than declared.
	ErrDataLength = errors.New("safetensors: tensor data length differs from declared size")
	// ErrIncomplete reports a Writer closed before every tensor was written.
	ErrIncomplete = errors.New("safetensors: not every tensor was written")
	// ErrWriterFailed reports use of a Writer after an earlier error left
	// its output incomplete.
	ErrWriterFailed = errors.New("safetensors: writer failed earlier")
)

// HeaderError is an error about one tensor of a header, or about the
// "__metadata__" entry as a whole (Tensor is then "__metadata__").
type HeaderError struct {
	Tensor string // name of the tensor the error is about
	Err    error  // the underlying error; matches one of the sentinels
}

// Error names the tensor (when known) and the cause.
func (e *HeaderError) Error() string {
	return fmt.Sprintf("tensor %q: %v", e.Tensor, e.Err)
}

// Unwrap returns the underlying error.
func (e *HeaderError) Unwrap() error { return e.Err }

// tensorErr wraps sentinel with detail into a *HeaderError for name.
func tensorErr(name string, sentinel error, format string, args ...any) error {
	if format == "" {
		return &HeaderError{Tensor: name, Err: sentinel}
	}
	return &HeaderError{Tensor: name, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}
