package statedict

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/ckpt-dev/ckpt/dtype"
)

// ErrInvalidSparse reports a sparse tensor whose components break torch's
// invariants (an index out of range, crow_indices not starting at 0 or not
// ending at the number of entries, components whose shapes do not agree,
// ...). torch.load refuses such a tensor (it validates every loaded sparse
// tensor, torch._validate_sparse_*); ckpt refuses the data of every storage
// the tensor's components live in, on every path that reads it (Tensor.Open,
// Tensor.Raw, Storage.Open, Storage.ReaderAt, hence load, verify and
// convert). The error names the tensor.
var ErrInvalidSparse = errors.New("statedict: sparse tensor invariants do not hold")

// sparseGroup is the sparse tensor a set of components belongs to. Its
// invariants are checked once, the first time the data of any storage of
// its components is read.
type sparseGroup struct {
	name      string
	layout    Layout
	shape     []int64 // the sparse tensor's size
	coalesced bool    // COO saved with is_coalesced=True
	parts     map[string]*Tensor
	once      sync.Once
	err       error
}

// checkSparse checks the invariants of every sparse tensor whose
// components live in s. Every way into a storage's bytes goes through it.
func (s *Storage) checkSparse() error {
	for _, g := range s.sparse {
		if err := g.validate(); err != nil {
			return &Error{File: s.File, Record: s.Record, Tensor: g.name, Err: err}
		}
	}
	return nil
}

// addSparse records that a component of g lives in s.
func (s *Storage) addSparse(g *sparseGroup) {
	if s != nil && !slices.Contains(s.sparse, g) {
		s.sparse = append(s.sparse, g)
	}
}

func (g *sparseGroup) validate() error {
	g.once.Do(func() {
		for _, p := range g.parts {
			if p.Storage == nil {
				return // a meta sparse tensor: no data to check or to read
			}
		}
		switch g.layout {
		case SparseCOO:
			g.err = g.checkCOO()
		case SparseCSR, SparseCSC, SparseBSR, SparseBSC:
			g.err = g.checkCompressed()
		}
		if g.err != nil {
			g.err = fmt.Errorf("%w: %s (%s): %v; torch.load refuses it too", ErrInvalidSparse, g.name, g.layout, g.err)
		}
	})
	return g.err
}

// indexStream reads the integer elements of an index tensor in C order.
type indexStream struct {
	t    *Tensor
	rc   io.ReadCloser
	br   *bufio.Reader
	size int
	left int64
}

func openIndices(t *Tensor) (*indexStream, error) {
	if t.DType != dtype.Int64 && t.DType != dtype.Int32 {
		return nil, fmt.Errorf("%s is %s, not an integer index tensor", t.Component, t.DType)
	}
	rc, err := t.openData()
	if err != nil {
		return nil, err
	}
	return &indexStream{t: t, rc: rc, br: bufio.NewReaderSize(rc, 16<<10), size: t.DType.Size(), left: t.NumEl()}, nil
}

func (s *indexStream) next() (int64, error) {
	if s.left <= 0 {
		return 0, fmt.Errorf("%w: %s ends early", ErrTruncated, s.t.Component)
	}
	s.left--
	var b [8]byte
	if _, err := io.ReadFull(s.br, b[:s.size]); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrTruncated, s.t.Component, err)
	}
	if s.size == 8 {
		return int64(binary.LittleEndian.Uint64(b[:8])), nil
	}
	return int64(int32(binary.LittleEndian.Uint32(b[:4]))), nil
}

func (s *indexStream) Close() error { return s.rc.Close() }

// row returns row d of a 2-D tensor as a 1-D tensor over the same storage.
func row(t *Tensor, d int64) *Tensor {
	r := *t
	r.Shape = t.Shape[1:]
	r.Strides = t.Strides[1:]
	r.Offset = t.Offset + d*t.Strides[0]
	return &r
}

// checkCOO checks what torch._validate_sparse_coo_tensor_args does:
// indices is an int64 [sparse_dim, nnz] tensor, values [nnz, *dense] with
// sparse_dim + dense_dim dimensions in all and the dense sizes of the
// tensor; every index row is within its dimension; a tensor saved as
// coalesced has its index columns sorted and distinct.
func (g *sparseGroup) checkCOO() error {
	ix, vals := g.parts["indices"], g.parts["values"]
	if ix == nil || vals == nil {
		return errors.New("indices or values missing")
	}
	if ix.DType != dtype.Int64 {
		return fmt.Errorf("indices are %s, torch wants int64", ix.DType)
	}
	if len(ix.Shape) != 2 {
		return fmt.Errorf("indices have %d dimensions, want 2 (sparse_dim, nnz)", len(ix.Shape))
	}
	if len(vals.Shape) < 1 {
		return errors.New("values have no dimension for the entries")
	}
	sparseDim, nnz := ix.Shape[0], ix.Shape[1]
	if sparseDim+int64(len(vals.Shape)-1) != int64(len(g.shape)) {
		return fmt.Errorf("sparse_dim %d + dense_dim %d is not the %d dimensions of size %v", sparseDim, len(vals.Shape)-1, len(g.shape), g.shape)
	}
	if vals.Shape[0] != nnz {
		return fmt.Errorf("indices have %d entries but values %d", nnz, vals.Shape[0])
	}
	if !slices.Equal(vals.Shape[1:], g.shape[sparseDim:]) {
		return fmt.Errorf("values have dense sizes %v, size %v wants %v", vals.Shape[1:], g.shape, g.shape[sparseDim:])
	}
	rows := make([]*indexStream, sparseDim)
	defer func() {
		for _, r := range rows {
			if r != nil {
				r.Close()
			}
		}
	}()
	for d := range rows {
		r, err := openIndices(row(ix, int64(d)))
		if err != nil {
			return err
		}
		rows[d] = r
	}
	prev := make([]int64, sparseDim)
	cur := make([]int64, sparseDim)
	for j := int64(0); j < nnz; j++ {
		for d, r := range rows {
			v, err := r.next()
			if err != nil {
				return err
			}
			if v < 0 || v >= g.shape[d] {
				return fmt.Errorf("indices[%d][%d] = %d is out of bounds for dimension %d of size %d", d, j, v, d, g.shape[d])
			}
			cur[d] = v
		}
		if g.coalesced && j > 0 && slices.Compare(prev, cur) >= 0 {
			return fmt.Errorf("saved as coalesced, but index column %d %v does not come after %v", j, cur, prev)
		}
		prev, cur = cur, prev
	}
	return nil
}

// checkCompressed checks what torch._validate_sparse_compressed_tensor_args
// does for CSR, CSC, BSR and BSC, batched or not: the components' shapes
// agree with each other and with the size, and for every batch the
// compressed indices start at 0, end at the number of entries and grow by
// 0 to the plain dimension's size each step, and the plain indices are in
// range, sorted and distinct within each compressed row (column).
func (g *sparseGroup) checkCompressed() error {
	cname, pname := "crow_indices", "col_indices"
	if g.layout == SparseCSC || g.layout == SparseBSC {
		cname, pname = "ccol_indices", "row_indices"
	}
	comp, plain, vals := g.parts[cname], g.parts[pname], g.parts["values"]
	if comp == nil || plain == nil || vals == nil {
		return fmt.Errorf("%s, %s or values missing", cname, pname)
	}
	if comp.DType != plain.DType || (comp.DType != dtype.Int64 && comp.DType != dtype.Int32) {
		return fmt.Errorf("%s (%s) and %s (%s) must be both int32 or both int64", cname, comp.DType, pname, plain.DType)
	}
	if len(comp.Shape) < 1 || len(plain.Shape) != len(comp.Shape) {
		return fmt.Errorf("%s has %d dimensions and %s %d", cname, len(comp.Shape), pname, len(plain.Shape))
	}
	batch := len(comp.Shape) - 1
	block := 0
	if g.layout == SparseBSR || g.layout == SparseBSC {
		block = 2
	}
	dense := len(vals.Shape) - batch - block - 1
	if dense < 0 || len(g.shape) != batch+2+dense {
		return fmt.Errorf("values with %d dimensions do not fit size %v with %d batch dimensions", len(vals.Shape), g.shape, batch)
	}
	bs := g.shape[:batch]
	if !slices.Equal(comp.Shape[:batch], bs) || !slices.Equal(plain.Shape[:batch], bs) || !slices.Equal(vals.Shape[:batch], bs) {
		return fmt.Errorf("batch sizes of %s %v, %s %v and values %v differ from size %v", cname, comp.Shape[:batch], pname, plain.Shape[:batch], vals.Shape[:batch], bs)
	}
	if !slices.Equal(vals.Shape[batch+1+block:], g.shape[batch+2:]) {
		return fmt.Errorf("values have dense sizes %v, size %v wants %v", vals.Shape[batch+1+block:], g.shape, g.shape[batch+2:])
	}
	rows, cols := g.shape[batch], g.shape[batch+1]
	if block == 2 {
		bh, bw := vals.Shape[batch+1], vals.Shape[batch+2]
		if bh <= 0 || bw <= 0 || rows%bh != 0 || cols%bw != 0 {
			return fmt.Errorf("blocks of %dx%d do not divide %dx%d", bh, bw, rows, cols)
		}
		rows, cols = rows/bh, cols/bw
	}
	compressed, bound, unit := rows, cols, "row"
	if cname == "ccol_indices" {
		compressed, bound, unit = cols, rows, "column"
	}
	if block == 2 {
		unit = "block " + unit
	}
	nnz := vals.Shape[batch]
	if comp.Shape[batch] != compressed+1 {
		return fmt.Errorf("%s has %d entries per batch, want %d", cname, comp.Shape[batch], compressed+1)
	}
	if plain.Shape[batch] != nnz {
		return fmt.Errorf("%s has %d entries per batch, want nnz %d (values)", pname, plain.Shape[batch], nnz)
	}
	cs, err := openIndices(comp)
	if err != nil {
		return err
	}
	defer cs.Close()
	ps, err := openIndices(plain)
	if err != nil {
		return err
	}
	defer ps.Close()
	nb := comp.NumEl() / max(compressed+1, 1)
	at := func(b, i int64) string { // an element's index, with its batch when batched
		if batch == 0 {
			return fmt.Sprintf("[%d]", i)
		}
		return fmt.Sprintf("[%d][%d]", b, i)
	}
	for b := int64(0); b < nb; b++ {
		prev, err := cs.next()
		if err != nil {
			return err
		}
		if prev != 0 {
			return fmt.Errorf("%s%s = %d, want 0", cname, at(b, 0), prev)
		}
		for i := int64(1); i <= compressed; i++ {
			v, err := cs.next()
			if err != nil {
				return err
			}
			if v-prev < 0 || v-prev > bound || v > nnz {
				return fmt.Errorf("%s%s = %d after %d: each step must be 0 to %d and within nnz %d", cname, at(b, i), v, prev, bound, nnz)
			}
			last := int64(-1)
			for k := prev; k < v; k++ {
				p, err := ps.next()
				if err != nil {
					return err
				}
				if p < 0 || p >= bound {
					return fmt.Errorf("%s%s = %d is out of bounds for size %d", pname, at(b, k), p, bound)
				}
				if p <= last {
					return fmt.Errorf("%s of %s %s are not sorted and distinct (%d after %d)", pname, unit, at(b, i-1), p, last)
				}
				last = p
			}
			prev = v
		}
		if prev != nnz {
			return fmt.Errorf("%s%s = %d, want the number of entries %d", cname, at(b, compressed), prev, nnz)
		}
	}
	return nil
}

// Validate checks what torch.load checks of a tensor beyond its metadata,
// reading what it needs: for a component of a sparse tensor (or any tensor
// sharing a storage with one), the sparse tensor's invariants, failing
// with ErrInvalidSparse. Reading the data checks the same; Validate is for
// callers that leave the data unread but must refuse what torch refuses
// (convert, which drops sparse tensors from its output). nil for tensors
// without data.
func (t *Tensor) Validate() error {
	if t.Storage == nil {
		return nil
	}
	return t.Storage.checkSparse()
}
