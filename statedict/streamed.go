package statedict

import (
	"context"
	"io"
)

// RangeStreamer is a file that can read a range of itself front to back
// through a stream of its own: objstore.Object, whose StreamRange makes
// the range's ranged GETs ahead of the reader and receives each straight
// into the reader's buffers.
type RangeStreamer interface {
	StreamRange(ctx context.Context, off, n int64) (io.ReadCloser, error)
}

// StreamSpan is where bytes lie, unchanged, in a file that streams
// ranges: Len bytes at offset Off of File.
type StreamSpan struct {
	// File is the checkpoint's open file; it stays open until the
	// Checkpoint is closed and must not be closed by the caller.
	File RangeStreamer
	// Off and Len are the range's offset in File and its length.
	Off, Len int64
}

// Streamed is InPlace for a file reached through an object store (a
// RangeStreamer): for a contiguous tensor whose storage is stored in place
// and needs no byte swap, where its logical elements lie in the file. A
// caller reading them all in order may then stream them
// (RangeStreamer.StreamRange) instead of reading them through Open, which
// serves reads of any size through the object's cache; the checksums that
// cover them (Storage.CRC32, recorded digests) are still the caller's to
// check. ok is false for everything else, a local file included. Like
// Open, it refuses the storage of a sparse tensor whose invariants do not
// hold (ErrInvalidSparse).
func (t *Tensor) Streamed() (span StreamSpan, ok bool, err error) {
	if t.Storage == nil || !t.IsContiguous() || t.Storage.BigEndian && t.DType.SwapUnit() > 1 {
		return StreamSpan{}, false, nil
	}
	b, e := t.Span()
	r, base, ok, err := t.Storage.outerSpan(b, e-b)
	if !ok || err != nil {
		return StreamSpan{}, false, err
	}
	rs, isRS := r.(RangeStreamer)
	if !isRS {
		return StreamSpan{}, false, nil
	}
	return StreamSpan{File: rs, Off: base, Len: e - b}, true, nil
}
