package statedict

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrInvalidSparse reports a sparse tensor whose components break torch's
// invariants (an index out of range, crow_indices not starting at 0 or not
// ending at the number of entries, ...). torch.load refuses such a tensor
// (it validates every loaded sparse tensor); ckpt refuses it when its data
// is read. The error names the tensor.
var ErrInvalidSparse = errors.New("statedict: sparse tensor invariants do not hold")

// sparseGroup is the sparse tensor a set of components belongs to. Its
// indices are checked once, the first time any component's data is read.
type sparseGroup struct {
	name   string
	layout Layout
	shape  []int64 // the sparse tensor's size
	parts  map[string]*Tensor
	once   sync.Once
	err    error
}

func (g *sparseGroup) validate() error {
	g.once.Do(func() {
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

// eachIndex streams the integer elements of an index component.
func eachIndex(t *Tensor, fn func(i int64, v int64) error) error {
	size := t.DType.Size()
	if t.DType != Int64 && t.DType != Int32 {
		return fmt.Errorf("%s is %s, not an integer index tensor", t.Component, t.DType)
	}
	rc, err := t.openData()
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	var b [8]byte
	for i := int64(0); i < t.NumEl(); i++ {
		if _, err := io.ReadFull(br, b[:size]); err != nil {
			return err
		}
		v := int64(int32(binary.LittleEndian.Uint32(b[:4])))
		if size == 8 {
			v = int64(binary.LittleEndian.Uint64(b[:8]))
		}
		if err := fn(i, v); err != nil {
			return err
		}
	}
	return nil
}

// checkCOO: indices is [sparse_dim, nnz], each row within its dimension.
func (g *sparseGroup) checkCOO() error {
	ix := g.parts["indices"]
	if ix == nil || ix.Storage == nil || len(ix.Shape) != 2 || ix.Shape[0] > int64(len(g.shape)) {
		return nil // no shape torch would check here
	}
	nnz := ix.Shape[1]
	return eachIndex(ix, func(i, v int64) error {
		d := i / max(nnz, 1)
		if v < 0 || v >= g.shape[d] {
			return fmt.Errorf("indices[%d][%d] = %d is out of bounds for dimension %d of size %d", d, i%max(nnz, 1), v, d, g.shape[d])
		}
		return nil
	})
}

// checkCompressed: for unbatched CSR/CSC/BSR/BSC, the compressed indices
// start at 0, never decrease, end at the number of entries and have one
// entry per row (column) plus one; plain indices are within range.
func (g *sparseGroup) checkCompressed() error {
	cname, pname := "crow_indices", "col_indices"
	if g.layout == SparseCSC || g.layout == SparseBSC {
		cname, pname = "ccol_indices", "row_indices"
	}
	comp, plain, vals := g.parts[cname], g.parts[pname], g.parts["values"]
	if comp == nil || plain == nil || comp.Storage == nil || plain.Storage == nil || len(comp.Shape) != 1 ||
		len(plain.Shape) != 1 || len(g.shape) < 2 {
		return nil // batched or unusual: not checked
	}
	rows, cols := g.shape[0], g.shape[1]
	if g.layout == SparseBSR || g.layout == SparseBSC {
		if vals == nil || len(vals.Shape) < 3 || vals.Shape[1] <= 0 || vals.Shape[2] <= 0 {
			return nil
		}
		rows, cols = rows/vals.Shape[1], cols/vals.Shape[2]
	}
	compressed, bound := rows, cols
	if cname == "ccol_indices" {
		compressed, bound = cols, rows
	}
	nnz := plain.Shape[0]
	if comp.Shape[0] != compressed+1 {
		return fmt.Errorf("%s has %d entries, want %d", cname, comp.Shape[0], compressed+1)
	}
	prev := int64(0)
	err := eachIndex(comp, func(i, v int64) error {
		switch {
		case i == 0 && v != 0:
			return fmt.Errorf("%s[0] = %d, want 0", cname, v)
		case v < prev:
			return fmt.Errorf("%s decreases at %d (%d after %d)", cname, i, v, prev)
		case i == comp.Shape[0]-1 && v != nnz:
			return fmt.Errorf("%s[-1] = %d, want the number of entries %d", cname, v, nnz)
		}
		prev = v
		return nil
	})
	if err != nil {
		return err
	}
	return eachIndex(plain, func(i, v int64) error {
		if v < 0 || v >= bound {
			return fmt.Errorf("%s[%d] = %d is out of bounds for size %d", pname, i, v, bound)
		}
		return nil
	})
}
