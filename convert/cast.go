package convert

import (
	"io"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/par"
)

const (
	// castChunk is the number of elements a castReader converts at a
	// time; castPiece the fewest given to one goroutine.
	castChunk = 256 << 10
	castPiece = 32 << 10
)

// castReader converts a stream of little-endian elements of one dtype to
// another, a chunk at a time, the chunk split across the CPUs.
type castReader struct {
	r        io.Reader
	from, to dtype.DType
	in       []byte
	mid      []float32
	out      []byte
	pending  []byte // converted bytes not yet returned
	err      error
}

func newCastReader(r io.Reader, from, to dtype.DType) *castReader {
	return &castReader{r: r, from: from, to: to, in: make([]byte, castChunk*from.Size()),
		mid: make([]float32, castChunk), out: make([]byte, castChunk*to.Size())}
}

// convert casts the first n elements of c.in to c.out.
func (c *castReader) convert(n int) {
	fs, ts := c.from.Size(), c.to.Size()
	part := func(lo, hi int) {
		dtype.DecodeFloat32(c.from, c.mid[lo:hi], c.in[lo*fs:hi*fs])
		dtype.EncodeFloat32(c.to, c.out[lo*ts:hi*ts], c.mid[lo:hi])
	}
	par.Range(n, castPiece, part)
}

func (c *castReader) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		n, err := io.ReadFull(c.r, c.in)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		fs := c.from.Size()
		whole := n / fs
		if n%fs != 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.convert(whole)
		c.pending = c.out[:whole*c.to.Size()]
		c.err = err
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}
