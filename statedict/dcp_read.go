package statedict

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// open returns the pieces of the chunks that hold elements of the box
// [lo, hi), reading each one's torch.save header on first use: a slice
// of a rank's share touches only the chunks (and files) it needs.
func (dt *dcpTensor) open(lo, hi []int64) ([]*piece, error) {
	if dt.problem != nil {
		return nil, dt.problem
	}
	dt.pmu.Lock()
	defer dt.pmu.Unlock()
	if dt.pieces == nil {
		dt.pieces = make([]*piece, len(dt.chunks))
	}
	var ps []*piece
	for i, c := range dt.chunks {
		if !chunkMeets(c, lo, hi) {
			continue
		}
		if dt.pieces[i] == nil {
			p, err := dt.openChunk(c)
			if err != nil {
				return nil, err
			}
			dt.pieces[i] = p
		}
		ps = append(ps, dt.pieces[i])
	}
	return ps, nil
}

// chunkMeets reports whether chunk c holds an element of the box [lo, hi).
func chunkMeets(c Chunk, lo, hi []int64) bool {
	for d := range c.Offsets {
		if c.Offsets[d] >= hi[d] || lo[d] >= c.Offsets[d]+c.Sizes[d] {
			return false
		}
	}
	return true
}

func (dt *dcpTensor) openChunk(c Chunk) (*piece, error) {
	fail := func(err error) error {
		return &contextError{fmt.Sprintf("chunk at %v in %s bytes %d+%d", c.Offsets, c.File, c.Begin, c.Length), err}
	}
	if dt.pieceOf != nil {
		p, err := dt.pieceOf(c)
		if err != nil {
			return nil, fail(err)
		}
		return p, nil
	}
	o := dt.files[c.File]
	if p, isST, err := dt.safetensorsChunk(o, c); isST {
		if err != nil {
			return nil, fail(err)
		}
		return p, nil
	}
	cfg := *dt.cfg
	sub, err := readZip(io.NewSectionReader(o.f, c.Begin, c.Length), c.Length, &cfg)
	if err != nil {
		return nil, fail(err)
	}
	dt.mu.Lock()
	dt.ck.closers = append(dt.ck.closers, sub)
	dt.mu.Unlock()
	if len(sub.Tensors) != 1 {
		return nil, fail(fmt.Errorf("%w: it holds %d tensors, not 1", ErrMalformed, len(sub.Tensors)))
	}
	ct := sub.Tensors[0]
	if ct.DType != dt.dtype || !slices.Equal(ct.Shape, c.Sizes) {
		return nil, fail(fmt.Errorf("%w: it holds %s%v, the metadata says %s%v", ErrMalformed, ct.DType, ct.Shape, dt.dtype, c.Sizes))
	}
	p, err := tensorPiece(ct)
	if err != nil {
		return nil, fail(err)
	}
	p.lo = c.Offsets
	p.hi = make([]int64, len(c.Offsets))
	for d := range p.hi {
		p.hi[d] = c.Offsets[d] + c.Sizes[d]
	}
	p.file = dt.cfg.display(dt.cfg.join(dt.dir, c.File))
	if st := ct.Storage; st.HasCRC && p.contig && p.swap == 0 && p.off == 0 && ct.NBytes() == st.NBytes {
		p.crc, p.hasCRC = st.CRC32, true
	}
	return p, nil
}

// contextError prefixes an error with where it happened, without the
// "statedict: " of the sentinel it wraps.
type contextError struct {
	where string
	err   error
}

func (e *contextError) Error() string {
	return e.where + ": " + strings.TrimPrefix(e.err.Error(), "statedict: ")
}

func (e *contextError) Unwrap() error { return e.err }
