package convert

import (
	"io"

	"github.com/ckpt-dev/ckpt/digest"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/par"
)

const (
	// castChunk is the most elements a castReader converts at a time;
	// castPiece the fewest given to one goroutine (the casts through
	// float32; a direct one runs on the reading goroutine, where its
	// input was just read and its output is hashed next: the vector
	// kernels take tens of microseconds a chunk, about what waking a
	// second goroutine costs).
	castChunk = 256 << 10
	castPiece = 32 << 10
	// castUnit is the output a cast into the caller's buffer comes in
	// whole numbers of: the output's digest hashes whole chunks of a
	// tensor with its vector kernel, a piece across a chunk's end with
	// the scalar one.
	castUnit = digest.ChunkSize
)

// castBufs holds castReaders' buffers between tensors (castChunk elements
// of up to 8 bytes each), and castMid their float32 staging, so that a
// conversion of many tensors touches the same memory again rather than
// fresh pages per tensor (a free list the collector does not empty).
var (
	castBufs = par.FreeList[byte]{Max: 4}
	castMid  = par.FreeList[float32]{Max: 2}
)

// castReader converts a stream of little-endian elements of one dtype to
// another, up to a chunk at a time: straight from bytes to bytes where
// dtype.CastBytes has the pair (the vector kernels), through float32
// otherwise, that split across the CPUs.
type castReader struct {
	r        io.Reader
	from, to dtype.DType
	direct   dtype.Caster
	inBuf    *[]byte
	outBuf   *[]byte
	midBuf   *[]float32
	in       []byte
	mid      []float32
	out      []byte
	pending  []byte // converted bytes not yet returned
	err      error
}

func newCastReader(r io.Reader, from, to dtype.DType) *castReader {
	c := &castReader{r: r, from: from, to: to, direct: dtype.CastBytes(from, to)}
	c.inBuf, c.outBuf = castBufs.Get(castChunk*8), castBufs.Get(castChunk*8)
	c.in, c.out = (*c.inBuf)[:castChunk*from.Size()], (*c.outBuf)[:castChunk*to.Size()]
	if c.direct == nil {
		c.midBuf = castMid.Get(castChunk)
		c.mid = *c.midBuf
	}
	return c
}

// convert casts the first n elements of c.in to out: a direct cast on
// this goroutine, the float32 route split across the CPUs.
func (c *castReader) convert(n int, out []byte) {
	fs, ts := c.from.Size(), c.to.Size()
	if c.direct != nil {
		c.direct(out[:n*ts], c.in[:n*fs])
		return
	}
	part := func(lo, hi int) {
		dtype.DecodeFloat32(c.from, c.mid[lo:hi], c.in[lo*fs:hi*fs])
		dtype.EncodeFloat32(c.to, out[lo*ts:hi*ts], c.mid[lo:hi])
	}
	par.Range(n, castPiece, part)
}

// release gives the buffers back once the stream is done.
func (c *castReader) release() {
	if c.inBuf != nil {
		castBufs.Put(c.inBuf)
		castBufs.Put(c.outBuf)
		castMid.Put(c.midBuf)
		c.inBuf, c.outBuf, c.midBuf, c.in, c.out, c.mid = nil, nil, nil, nil, nil, nil
	}
}

func (c *castReader) Read(p []byte) (int, error) {
	fs, ts := c.from.Size(), c.to.Size()
	for len(c.pending) == 0 {
		if c.err != nil {
			c.release()
			return 0, c.err
		}
		// Straight into the caller's buffer (the output's) as many
		// whole units as fit, up to a chunk; when not one fits, a unit
		// into c.out, handed out over the next calls.
		elems, direct := castUnit/ts, false
		if fit := len(p) / castUnit * castUnit / ts; fit > 0 {
			elems, direct = min(castChunk, fit), true
		}
		n, err := io.ReadFull(c.r, c.in[:elems*fs])
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		whole := n / fs
		if n%fs != 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		c.err = err
		if direct {
			if whole == 0 {
				continue
			}
			c.convert(whole, p)
			return whole * ts, nil
		}
		c.convert(whole, c.out)
		c.pending = c.out[:whole*ts]
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}
