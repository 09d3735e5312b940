package gguf

import (
	"errors"
	"fmt"
)

// Errors. Every error Parse returns wraps one of these (errors.Is) and is
// a *FormatError saying where in the file it was found.
var (
	// ErrNotGGUF: the file does not start with the GGUF magic.
	ErrNotGGUF = errors.New("gguf: not a GGUF file")
	// ErrVersion: a version this package does not read (1, 2 and 3 are read).
	ErrVersion = errors.New("gguf: unsupported version")
	// ErrMalformed: the file breaks the format (an unknown value type, a
	// duplicate key or tensor name, a tensor outside the data section,
	// overlapping tensors, a misaligned offset, a bad general.alignment).
	ErrMalformed = errors.New("gguf: malformed file")
	// ErrTruncated: the file ends inside the header, the metadata or the
	// tensor infos, or a tensor's data runs past its end.
	ErrTruncated = errors.New("gguf: truncated file")
	// ErrLimit: a count or length is beyond a Limits bound.
	ErrLimit = errors.New("gguf: limit exceeded")
)

// FormatError locates a parse error: the byte offset, and the metadata key
// or tensor name being read when it happened.
type FormatError struct {
	Offset int64
	Key    string // metadata key, when in the metadata
	Tensor string // tensor name, when in the tensor infos
	Msg    string
	Err    error
}

func (e *FormatError) Error() string {
	where := fmt.Sprintf("at byte %d", e.Offset)
	if e.Key != "" {
		where += fmt.Sprintf(", metadata key %q", e.Key)
	}
	if e.Tensor != "" {
		where += fmt.Sprintf(", tensor %q", e.Tensor)
	}
	return fmt.Sprintf("%v: %s (%s)", e.Err, e.Msg, where)
}

func (e *FormatError) Unwrap() error { return e.Err }
