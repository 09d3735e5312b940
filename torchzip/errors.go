package torchzip

import (
	"errors"
	"fmt"
)

// Sentinel errors; errors about one record or entry are a *RecordError
// that wraps one of them.
var (
	// ErrUnsupportedDType: the dtype has no classic typed storage class,
	// so torch 1.13 cannot read a storage of it.
	ErrUnsupportedDType = errors.New("torchzip: dtype has no typed storage class")
	// ErrUnsupportedValue: a value the emitter does not write (an object
	// of another class, a frozenset, an integer of more than 255 bytes).
	ErrUnsupportedValue = errors.New("torchzip: value not writable")
	// ErrInvalid: a malformed entry (bad storage reference, shape and
	// stride lengths that differ, negative sizes, an empty or duplicate
	// record name).
	ErrInvalid = errors.New("torchzip: invalid entry")
	// ErrDataLength: a record's reader held fewer or more bytes than declared.
	ErrDataLength = errors.New("torchzip: record data length differs from declared size")
	// ErrClosed: the Writer was used after Close or after an error that
	// left the archive incomplete.
	ErrClosed = errors.New("torchzip: writer closed or failed")
)

// RecordError names the record or state-dict entry an error is about.
type RecordError struct {
	Name string // record name ("data/0") or state-dict key
	Err  error
}

// Error names the record and the cause.
func (e *RecordError) Error() string { return fmt.Sprintf("%q: %v", e.Name, e.Err) }

// Unwrap returns the underlying error.
func (e *RecordError) Unwrap() error { return e.Err }

// Sentinel errors of reading (Reader). Their texts after "torchzip: " are
// the words package statedict uses for the same faults, so that a
// checkpoint's error reads the same whichever package found it.
var (
	// ErrNotTorchZip: a zip whose records are not under one top folder,
	// as torch.save writes them.
	ErrNotTorchZip = errors.New("torchzip: unknown checkpoint format")
	// ErrTruncated: the archive ends before its directory or a record
	// says it does.
	ErrTruncated = errors.New("torchzip: truncated file")
	// ErrMalformed: the archive is inconsistent: an unreadable
	// directory, two records of one name, records sharing bytes, a record
	// larger than its limit or than its bytes can produce.
	ErrMalformed = errors.New("torchzip: malformed checkpoint")
	// ErrUnsupported: a compression method other than stored and deflated.
	ErrUnsupported = errors.New("torchzip: unsupported")
)
