package convert

import (
	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/statedict"
)

// workerDigest asks a dequantized weight's decode workers to compute its
// output digest (xxh64c: statedict.Tensor.HashStream with digest's
// chunks), when its output bytes are its stream's: the item read whole,
// not cast, not transformed. It returns the digest's source once the
// stream is read, or nil when the writer must hash the stream itself.
func (c *config) workerDigest(it *item) func() (digest.Value, error) {
	t := it.src
	if it.dtype != t.DType || c.transformed[t.Storage] != nil {
		return nil
	}
	if !t.HashStream(statedict.ChunkHash{Size: digest.ChunkSize, Sums: digest.ChunkSums}) {
		return nil
	}
	n := it.nbytes()
	return func() (digest.Value, error) {
		sums, err := t.StreamChunkSums()
		if err != nil {
			return 0, err
		}
		return digest.Combine(n, sums)
	}
}
