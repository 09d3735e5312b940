package convert

import (
	"errors"
	"fmt"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
)

// Sentinel errors of this package. Errors about one tensor are a
// *TensorError wrapping one of them.
var (
	// ErrCollision: two names are equal after stripping and renaming.
	ErrCollision = errors.New("convert: names collide after renaming")
	// ErrExists: the output exists and WithForce was not given.
	ErrExists = errors.New("convert: output exists (use --force to replace it)")
	// ErrFormat: the output format is unknown or cannot be inferred.
	ErrFormat = errors.New("convert: unknown output format")
	// ErrOption: an option value is invalid (size, rename rule, glob, dtype).
	ErrOption = errors.New("convert: invalid option")
	// ErrNothing: no tensor is left to write.
	ErrNothing = errors.New("convert: no tensor to write")
	// ErrPartialShard: a DTensor's local shard (one rank's file of an
	// FSDP2 or tensor-parallel state dict) is not the whole tensor.
	ErrPartialShard = errors.New("convert: this file holds one rank's shard of a DTensor, not the tensor")
	// ErrTooLarge: a safetensors output would hold more tensor bytes than
	// WithMaxMaterialized allows (views copied out contiguous).
	ErrTooLarge = errors.New("convert: output too large")
	// ErrNotRegular: an output path names something other than a regular
	// file (a device, a FIFO, a socket, a directory), which Convert never
	// replaces; the sentinel of the internal package that writes local
	// outputs.
	ErrNotRegular = atomicfile.ErrNotRegular
	// ErrDestination: the output names a URL and no Destination was
	// given for it (ckpt.Convert writes to s3://, gs:// and az:// URLs);
	// it is refused rather than written to a local directory named after
	// the URL.
	ErrDestination = errors.New("convert: output is a URL that cannot be written here (ckpt writes s3://, gs:// and az://)")
)

// TensorError names the tensor an error is about.
type TensorError struct {
	Name string
	Err  error
}

// Error names the tensor and the cause.
func (e *TensorError) Error() string { return fmt.Sprintf("tensor %q: %v", e.Name, e.Err) }

// Unwrap returns the underlying error.
func (e *TensorError) Unwrap() error { return e.Err }
