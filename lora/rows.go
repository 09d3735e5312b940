package lora

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/par"
	"github.com/ckpt-dev/ckpt/statedict"
)

// factor is one adapter's delta to a base weight of (rows, cols) as
// AddMatMul takes it: c += s * l (rows, r) @ rm (r, cols).
type factor struct {
	l, rm []float32
	r     int
	s     float32
	bufs  []*[]float32 // from factorBufs, given back by release
}

// factorBufs keeps the adapter factors' float32 buffers from one tensor to
// the next (a fresh buffer per tensor costs a page fault per 4 KiB, more
// than the rank-16 merge of the rows it serves on some VMs).
var factorBufs = par.FreeList[float32]{Max: 8}

// release gives f's buffers back to factorBufs; f is not used after.
func (f *factor) release() {
	for _, b := range f.bufs {
		factorBufs.Put(b)
	}
	f.bufs = nil
}

// rawBufs keeps the buffer the adapter factors' stored bytes are read
// into (statedict.Tensor.ReadAll made a fresh one per factor: ~3,000
// page faults per GB of base merged at rank 16).
var rawBufs = par.FreeList[byte]{Max: 1}

// pooledFloats is t's values as float32s, in a buffer from factorBufs,
// read as statedict.Tensor.ReadAll reads them into a buffer from rawBufs.
func pooledFloats(t *statedict.Tensor) (*[]float32, error) {
	n := t.NumEl() * int64(t.DType.Size())
	if t.NBytes() != n {
		return nil, fmt.Errorf("%w: %d bytes for %d %s elements", ErrShape, t.NBytes(), t.NumEl(), t.DType)
	}
	rc, err := t.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b := rawBufs.Get(int(n))
	defer rawBufs.Put(b)
	if _, err := io.ReadFull(rc, *b); err != nil {
		return nil, readError(t, err)
	}
	v := factorBufs.Get(int(t.NumEl()))
	dtype.DecodeFloat32(t.DType, *v, *b)
	return v, nil
}

// readError is the error of a failed read of t's bytes, as
// statedict.Tensor.ReadAll gives it: a short read is ErrTruncated, the
// reader's own error naming a tensor is kept.
func readError(t *statedict.Tensor, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return &statedict.Error{Tensor: t.Name, Err: fmt.Errorf("%w: %v", statedict.ErrTruncated, err)}
	}
	var e *statedict.Error
	if errors.As(err, &e) && e.Tensor != "" {
		return err
	}
	return &statedict.Error{Tensor: t.Name, Err: err}
}

// factors returns p's delta as the product L @ R laid out as the weight
// (cols its columns): L = B (out, r), R = A (r, in) for (out, in) weights,
// L = A.T, R = B.T for fan_in_fan_out and embeddings.
// Call release when done with it.
func (p part) factors(cols int) (factor, error) {
	a, err := pooledFloats(p.m.a)
	if err != nil {
		return factor{}, fmt.Errorf("%s: %w", p.m.a.Name, err)
	}
	b, err := pooledFloats(p.m.b)
	if err != nil {
		factorBufs.Put(a)
		return factor{}, fmt.Errorf("%s: %w", p.m.b.Name, err)
	}
	r := int(matrix(p.m.a.Shape)[0])
	in := int(matrix(p.m.a.Shape)[1]) // columns of B @ A
	f := factor{l: *b, rm: *a, r: r, s: float32(p.scale), bufs: []*[]float32{a, b}}
	if !p.rowsOK {
		f.l, f.rm = transpose(*a, r, in), transpose(*b, cols, r)
	}
	return f, nil
}

// RowCols returns the length of t's rows (its columns as a matrix) when
// its merge can be done a block of rows at a time (MergeRows), and 0 when
// t must be merged whole by Apply: a replacement, a bias, a DoRA weight
// (its norm spans the whole tensor), or a tensor the merge does not touch.
func (m *Merger) RowCols(t *statedict.Tensor) int64 {
	ps := m.parts[t.Name]
	if len(ps) == 0 {
		return 0
	}
	for _, p := range ps {
		if p.kind == KindReplacement || p.kind == KindBias || p.dora {
			return 0
		}
	}
	ws := matrix(t.Shape)
	if ws == nil {
		return 0
	}
	return ws[1]
}

// MergeRows reads t's adapter factors and returns the function that
// merges rows r0 to r1 of t, and the one that gives its buffers back once
// no more rows are asked for: src holds them in t's dtype, dst receives
// them encoded as to. It gives the bits Apply gives (decode to float32,
// each adapter's s * L @ R added in adapter order, encode), computed a
// tile of a few rows and columns at a time (mergeRows) so that the values
// go from src to dst without a float32 copy of the tensor. The function
// works on the calling goroutine and may be called from several at once on
// disjoint rows (convert's row stream runs one per CPU). t must be one
// RowCols accepts.
func (m *Merger) MergeRows(ctx context.Context, t *statedict.Tensor) (merge func(dst []byte, to dtype.DType, src []byte, r0, r1 int64), release func(), err error) {
	cols := m.RowCols(t)
	if cols == 0 {
		return nil, nil, fmt.Errorf("%w: %s is merged whole", ErrUnsupported, t.Name)
	}
	var fs []factor
	release = func() {
		for i := range fs {
			fs[i].release()
		}
	}
	for _, p := range m.parts[t.Name] {
		if err := ctx.Err(); err != nil {
			release()
			return nil, nil, err
		}
		f, err := p.factors(int(cols))
		if err != nil {
			release()
			return nil, nil, err
		}
		fs = append(fs, f)
	}
	from := t.DType
	return func(dst []byte, to dtype.DType, src []byte, r0, r1 int64) {
		mergeRows(dst, to, src, from, fs, int(cols), int(r0), int(r1))
	}, release, nil
}

// mergeRows is MergeRows' function: rows r0 to r1 of the weight, src and
// dst holding those rows only, on the calling goroutine (the caller runs
// blocks of rows on several at once). A bfloat16 weight merged into
// bfloat16 with one adapter goes four rows and 64 columns at a time
// through the AVX-512 kernel where the CPU has one (mergeBF16x4AVX512,
// decode and encode fused in), the other rows and columns a tile of one
// row at a time (mergeTiles).
func mergeRows(dst []byte, to dtype.DType, src []byte, from dtype.DType, fs []factor, cols, r0, r1 int) {
	is, os := from.Size(), to.Size()
	rows := r1 - r0
	_ = src[rows*cols*is-1]
	_ = dst[rows*cols*os-1]
	fused := 0 // columns of each group of four rows done by the AVX-512 kernel
	if have512 && len(fs) == 1 && from == dtype.BFloat16 && to == dtype.BFloat16 {
		fused = cols / vecCols * vecCols
	}
	i := 0
	if fused > 0 {
		f := fs[0]
		for ; i+4 <= rows; i += 4 {
			e := i * cols * 2
			mergeBF16x4AVX512(&dst[e], &src[e], cols*2, &f.l[(r0+i)*f.r], f.r, &f.rm[0], cols, fused, f.s)
			if fused < cols {
				mergeTiles(dst, to, src, from, fs, cols, r0, i, i+4, fused)
			}
		}
	}
	mergeTiles(dst, to, src, from, fs, cols, r0, i, rows, 0)
}

// mergeTiles does columns c0 to cols of rows lo to hi (counted from r0) a
// 256-column tile of one row at a time: decoded to float32, every
// adapter's delta added in order (the AVX2 kernel on whole groups of 64
// columns where the CPU has it), encoded.
func mergeTiles(dst []byte, to dtype.DType, src []byte, from dtype.DType, fs []factor, cols, r0, lo, hi, c0 int) {
	is, os := from.Size(), to.Size()
	var tile [tileCols]float32
	for j0 := c0; j0 < cols; j0 += tileCols {
		w := min(tileCols, cols-j0)
		wv := 0
		if haveVec {
			wv = w / vecCols * vecCols
		}
		c := tile[:w:w]
		for i := lo; i < hi; i++ {
			e := i*cols + j0
			dtype.DecodeFloat32(from, c, src[e*is:(e+w)*is])
			row := r0 + i
			for _, f := range fs {
				if wv > 0 {
					addRowVec(&c[0], &f.l[row*f.r], &f.rm[j0], cols, f.r, wv, f.s)
				}
				if wv < w {
					addTileGo(c[wv:], f.l[row*f.r:(row+1)*f.r], f.rm, cols, j0+wv, f.s)
				}
			}
			dtype.EncodeFloat32(to, dst[e*os:(e+w)*os], c)
		}
	}
}
