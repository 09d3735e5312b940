package dcp

import "errors"

// Sentinel errors. Writing fails with ErrInvalid; every error reading
// detects matches one of the others with errors.Is. Their texts after
// "dcp: " are the words package statedict uses for the same faults, so
// that a checkpoint's error reads the same whichever package found it.
var (
	// ErrInvalid reports metadata that torch could not load: an empty or
	// duplicate name, a chunk outside its tensor, a negative offset or
	// length (Metadata.Encode).
	ErrInvalid = errors.New("dcp: invalid metadata")

	// ErrMalformed: the .metadata (or a safetensors file's
	// DCP_SHARDING_INFO) is not what torch writes: a wrong class, a
	// missing field, a value of the wrong type, a file name that is not a
	// plain name inside the checkpoint directory.
	ErrMalformed = errors.New("dcp: malformed checkpoint")
	// ErrTiling: a tensor's chunks do not tile it exactly: a gap, an
	// overlap, a chunk outside the shape. The checkpoint still opens
	// (inspect shows the problem); reading the tensor fails.
	ErrTiling = errors.New("dcp: chunks do not tile the tensor")
	// ErrMissing: an item the metadata lists has no storage entry, or its
	// file cannot be opened.
	ErrMissing = errors.New("dcp: missing storage record")
	// ErrTruncated: an item's bytes lie outside its file, or the file
	// ends before the metadata's size says it does.
	ErrTruncated = errors.New("dcp: truncated file")
	// ErrOverflow: a shape or offset overflows 64-bit arithmetic.
	ErrOverflow = errors.New("dcp: size overflows int64")
	// ErrUnsupported: a layout this reader does not check (chunks split
	// on several dimensions beyond the pairwise bound).
	ErrUnsupported = errors.New("dcp: unsupported")
)
