package statedict

import (
	"context"
	"errors"
	"io"
)

// FormatDCP is a torch.distributed.checkpoint directory: a .metadata pickle
// and one or more .distcp files written by FileSystemWriter.
const FormatDCP Format = "dcp"

// DCPMetadata is the name of the metadata file of a DCP directory.
const DCPMetadata = ".metadata"

// ErrTiling reports DCP chunks that do not tile their tensor exactly: a gap,
// an overlap, a chunk outside the shape, or a chunk whose bytes are missing.
// Open still succeeds (inspect shows the problem); reading the tensor fails.
var ErrTiling = errors.New("statedict: chunks do not tile the tensor")

// ErrChunkCRC reports a DCP chunk whose bytes disagree with the CRC32 its
// torch.save zip recorded: the file was damaged after it was written.
// Reading a whole tensor checks every chunk; slices cannot.
var ErrChunkCRC = errors.New("statedict: chunk bytes disagree with their CRC32")

// Chunk is one piece of a tensor of a DCP checkpoint: the box
// [Offsets, Offsets+Sizes) of the global tensor, saved as a torch.save
// file at bytes [Begin, Begin+Length) of File.
type Chunk struct {
	Offsets []int64
	Sizes   []int64
	File    string // .distcp file name, relative to the checkpoint directory
	Rank    int    // the rank that wrote File (__R_N.distcp), -1 when the name does not say
	Begin   int64
	Length  int64
}

// Chunks returns the chunks a DCP tensor is assembled from (replicated
// duplicates removed), nil for a tensor of any other format.
func (t *Tensor) Chunks() []Chunk {
	if t.Storage == nil {
		return nil
	}
	if g, ok := t.Storage.src.(*gatherSource); ok && g.g.dcp != nil {
		return g.g.dcp.chunks
	}
	return nil
}

// Problem returns why a DCP tensor cannot be read (an ErrTiling or
// ErrMissingRecord error: a gap, an overlap, a chunk outside the shape, a
// missing file), nil when it can or for other formats.
func (t *Tensor) Problem() error {
	if t.Storage == nil {
		return nil
	}
	if g, ok := t.Storage.src.(*gatherSource); ok && g.g.dcp != nil {
		return g.g.dcp.problem
	}
	return nil
}

// VerifyChunks reads a DCP tensor whole, checking the CRC32 of every
// chunk whose torch.save zip recorded one for exactly its bytes, and
// returns how many it checked. A mismatch is an ErrChunkCRC error naming
// the file; for other tensors it reads nothing and returns 0, nil.
func (t *Tensor) VerifyChunks(ctx context.Context) (int, error) {
	if t.Chunks() == nil {
		return 0, nil
	}
	if err := t.Problem(); err != nil {
		return 0, &Error{File: t.Storage.File, Tensor: t.Name, Err: err}
	}
	src := t.Storage.src.(*gatherSource)
	rc, err := src.g.stream(src.lo, src.hi)
	if err != nil {
		return 0, &Error{File: t.Storage.File, Tensor: t.Name, Err: err}
	}
	defer rc.Close()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		_, err := rc.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	n := 0
	for _, ps := range rc.(*boxStream).subs {
		if ps != nil && ps.checked {
			n++
		}
	}
	return n, nil
}
