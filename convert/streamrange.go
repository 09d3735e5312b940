package convert

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
)

// A tensor stored unchanged in an object (s3://, gs://, az://, https://)
// is streamed (statedict.Tensor.Streamed, objstore's StreamRange): its
// ranged GETs are made ahead of the output's writer, and each body is
// received straight into the writer's buffers (atomicfile.Writer.ReadFrom
// reads into them), through the same checks as any read (the
// checkedReader: CRC32 of a zip record, the recorded digest) and into
// the output's digest, hot in the CPU's cache. Read through Open instead,
// every byte was copied once more, out of the object's chunk cache: a
// quarter of the client's CPU of `ckpt convert s3://` from a server
// holding the object in memory (docs/benchmarks.md).

// streamMin is the smallest tensor streamed: smaller ones are read
// through the object's chunk cache, whose read-ahead runs across
// tensors.
const streamMin = 4 << 20

// streamedTensors counts the tensors streamed, and noStream turns the
// streaming off (for tests).
var (
	streamedTensors atomic.Int64
	noStream        bool
)

// streamedItemReader is itemReader, with the bytes under the checks
// streamed where the item's are stored unchanged in an object.
func (c *config) streamedItemReader(ctx context.Context, it *item) (io.ReadCloser, *checkedReader, error) {
	rc, cr, err := c.itemReader(ctx, it)
	if err != nil || noStream || c.transformed[it.src.Storage] != nil || it.src.NBytes() < streamMin {
		return rc, cr, err
	}
	span, ok, err := it.src.Streamed()
	if err == nil && ok && span.Len == it.src.NBytes() {
		var s io.ReadCloser
		if s, err = span.File.StreamRange(ctx, span.Off, span.Len); err == nil {
			// cr reads what Tensor.Open returned (itemReader, through
			// tensorReader): the same bytes, which it now takes from
			// the stream. Open's reader only wraps the file (it has
			// read nothing yet), and is closed with the stream.
			cr.r = s
			streamedTensors.Add(1)
			return struct {
				io.Reader
				io.Closer
			}{rc, closers{s, rc}}, cr, nil
		}
	}
	if err != nil {
		rc.Close()
		return nil, nil, &TensorError{Name: it.name, Err: err}
	}
	return rc, cr, nil
}

// closers closes each of its members, returning their errors joined.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
