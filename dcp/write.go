package dcp

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// Writing a DCP checkpoint in FileSystemWriter's layout: a Writer places
// the given tensors on ranks (whole, balanced by bytes, or split into one
// chunk per rank), streams each rank's items into its file, and then
// encodes the .metadata. It knows nothing of where the bytes come from
// (a Source) or go (an io.Writer per rank).

// WriteItem is one entry of the state dict a Writer saves: a tensor
// (Tensor set: Spec, and how it is placed), or a non-tensor value (Value:
// an object tree WriteValueTensors writes, with the tensors it holds).
type WriteItem struct {
	FQN  string
	Path []any // planner_data path; nil: (FQN,), a key of a flat state dict
	// Pos orders the entries of .metadata: by Pos, in the given order
	// where equal (torch's order of the input's leaves).
	Pos int

	Tensor bool
	Spec   TensorSpec // a tensor's dtype, shape and flags
	// Split places a tensor as one chunk per rank along dimension Dim,
	// as torch.chunk and DTensor's Shard place it (ChunkBounds); chunk R
	// goes to rank R. Without it (or with one rank) the tensor goes whole
	// to the rank with the fewest bytes so far, largest tensors first.
	Split bool
	Dim   int

	Value        any          // a value's object tree
	ValueTensors []TensorSpec // the tensors Value holds (see WriteValueTensors)
}

// Piece is one tensor item of a Writer's plan: a whole tensor, or one
// chunk of it, the box [Offsets, Offsets+Sizes) of the global tensor.
type Piece struct {
	Item    int // index of its WriteItem
	Rank    int
	Offsets []int64
	Sizes   []int64

	entry, chunk int // in the metadata
}

// Source gives a Writer the bytes of the tensors it saves, in C order,
// little-endian. Each reader is closed once read, or when the write
// fails; an error from Close once every byte is read (a checksum the
// source disagrees with) fails the write.
type Source interface {
	// Tensor opens the data of piece p (Spec(p) bytes).
	Tensor(ctx context.Context, p Piece) (io.ReadCloser, error)
	// ValueTensor opens the data of tensor k of value item i.
	ValueTensor(ctx context.Context, i, k int) (io.ReadCloser, error)
}

// ItemError is a failure writing item Item (an index into the Writer's
// items); Tensor is the index of the value's tensor being written (or
// opened), -1 for a tensor item or the value's own pickle. FromSource
// reports that Err is the Source's own error, unchanged: opening a tensor
// item, or closing a reader.
type ItemError struct {
	Item, Tensor int
	FromSource   bool
	Err          error
}

func (e *ItemError) Error() string { return fmt.Sprintf("dcp: item %d: %v", e.Item, e.Err) }

func (e *ItemError) Unwrap() error { return e.Err }

// WriteOption configures a Writer.
type WriteOption func(*Writer)

// WithRanks makes a Writer write as ranks processes of
// torch.distributed.checkpoint.save would: one file FileName(R) per rank
// (default 1).
func WithRanks(ranks int) WriteOption { return func(w *Writer) { w.ranks = max(ranks, 1) } }

// WithBufferSize sets the copy buffer of tensor data (0: torchzip's
// default).
func WithBufferSize(n int) WriteOption { return func(w *Writer) { w.bufSize = n } }

// Writer writes one DCP checkpoint: NewWriter plans it, WriteRank writes
// (or measures) each rank's file, Metadata is then the .metadata.
type Writer struct {
	items   []WriteItem
	ranks   int
	bufSize int

	md         Metadata
	values     []int       // value items, in the given order
	valueEntry map[int]int // value item -> its entry
	byRank     [][]Piece
	order      [][]ItemRef // each rank's items as written
	sizes      []int64     // each rank's file size; -1 until written or measured
}

// NewWriter plans the checkpoint of items: its entries and where each
// tensor's chunks go. Nothing is read or written.
func NewWriter(items []WriteItem, opts ...WriteOption) (*Writer, error) {
	w := &Writer{items: items, ranks: 1, valueEntry: map[int]int{}}
	for _, o := range opts {
		o(w)
	}
	R := w.ranks
	seq := make([]int, len(items))
	for i := range seq {
		seq[i] = i
	}
	sort.SliceStable(seq, func(a, b int) bool { return items[seq[a]].Pos < items[seq[b]].Pos })
	var whole []*Piece
	var pieces []*Piece
	load := make([]int64, R)
	for _, i := range seq {
		it := &items[i]
		ei := len(w.md.Entries)
		if !it.Tensor {
			w.valueEntry[i] = ei
			w.md.Entries = append(w.md.Entries, Entry{FQN: it.FQN, Path: it.Path, Value: Location{File: FileName(0)}})
			continue
		}
		shape := it.Spec.Shape
		e := Entry{FQN: it.FQN, Path: it.Path, Tensor: true, DType: it.Spec.DType, Size: shape, RequiresGrad: it.Spec.RequiresGrad}
		if !it.Split || R == 1 || len(shape) == 0 {
			pc := &Piece{Item: i, entry: ei, Offsets: make([]int64, len(shape)), Sizes: shape}
			e.Chunks = []Chunk{{Offsets: pc.Offsets, Sizes: shape}}
			pieces, whole = append(pieces, pc), append(whole, pc)
		} else {
			if it.Dim < 0 || it.Dim >= len(shape) {
				return nil, fmt.Errorf("%w: %q split on dimension %d of %d", ErrInvalid, it.FQN, it.Dim, len(shape))
			}
			for r := range R {
				start, stop := ChunkBounds(shape[it.Dim], r, R)
				if stop <= start {
					continue
				}
				off := make([]int64, len(shape))
				off[it.Dim] = start
				sizes := append([]int64(nil), shape...)
				sizes[it.Dim] = stop - start
				pc := &Piece{Item: i, entry: ei, chunk: len(e.Chunks), Rank: r, Offsets: off, Sizes: sizes}
				e.Chunks = append(e.Chunks, Chunk{Offsets: off, Sizes: sizes})
				pieces = append(pieces, pc)
				load[r] += w.Spec(*pc).NBytes()
			}
		}
		w.md.Entries = append(w.md.Entries, e)
	}
	for i := range items {
		if !items[i].Tensor {
			w.values = append(w.values, i)
		}
	}
	// Whole tensors: largest first, each to the least loaded rank.
	order := append([]*Piece(nil), whole...)
	nb := func(pc *Piece) int64 { return w.Spec(*pc).NBytes() }
	sort.SliceStable(order, func(a, b int) bool { return nb(order[a]) > nb(order[b]) })
	for _, pc := range order {
		r := 0
		for k := 1; k < R; k++ {
			if load[k] < load[r] {
				r = k
			}
		}
		pc.Rank = r
		load[r] += nb(pc)
	}
	w.byRank = make([][]Piece, R)
	for _, pc := range pieces {
		w.byRank[pc.Rank] = append(w.byRank[pc.Rank], *pc)
	}
	w.order = make([][]ItemRef, R)
	w.sizes = make([]int64, R)
	for r := range w.sizes {
		w.sizes[r] = -1
	}
	return w, nil
}

// ChunkBounds is the part [start, stop) of a dimension of size n that
// rank gets of world, as torch.chunk and DTensor's Shard place it: every
// rank but the last non-empty ones gets ceil(n/world) indices, so later
// ranks may get fewer or none (10 over 4: 3, 3, 3, 1; 3 over 4: 1, 1, 1,
// 0).
func ChunkBounds(n int64, rank, world int) (start, stop int64) {
	if world <= 0 || rank < 0 || rank >= world {
		return 0, 0
	}
	c := (n + int64(world) - 1) / int64(world)
	start = min(n, c*int64(rank))
	return start, min(n, start+c)
}

// Ranks returns the number of ranks (files).
func (w *Writer) Ranks() int { return w.ranks }

// Pieces returns the tensor items rank r writes, in order.
func (w *Writer) Pieces(r int) []Piece { return w.byRank[r] }

// Spec returns the tensor item p is: its item's dtype and flags, p's
// shape.
func (w *Writer) Spec(p Piece) TensorSpec {
	s := w.items[p.Item].Spec
	return TensorSpec{DType: s.DType, Shape: p.Sizes, RequiresGrad: s.RequiresGrad}
}

// WriteRank writes the file of rank r to out, its data read from src:
// rank 0's file starts with the value items, as torch writes byte items
// first. With out nil it only measures the file (another process writes
// it): item lengths depend only on dtypes, shapes and values. It returns
// the file's size. Failures about one item are *ItemError.
func (w *Writer) WriteRank(ctx context.Context, r int, out io.Writer, src Source) (int64, error) {
	if r < 0 || r >= w.ranks {
		return 0, fmt.Errorf("%w: rank %d of %d", ErrInvalid, r, w.ranks)
	}
	var off int64
	var order []ItemRef
	if r == 0 {
		for _, i := range w.values {
			n, err := w.writeValue(ctx, out, i, src)
			if err != nil {
				return 0, err
			}
			ei := w.valueEntry[i]
			w.md.Entries[ei].Value = Location{File: FileName(0), Offset: off, Length: n}
			order = append(order, ItemRef{Entry: ei})
			off += n
		}
	}
	for _, pc := range w.byRank[r] {
		var n int64
		var err error
		if out == nil {
			n, err = TensorLength(w.Spec(pc))
		} else {
			n, err = w.writeTensor(ctx, out, pc, src)
		}
		if err != nil {
			return 0, err
		}
		w.md.Entries[pc.entry].Chunks[pc.chunk].Location = Location{File: FileName(r), Offset: off, Length: n}
		order = append(order, ItemRef{Entry: pc.entry, Chunk: pc.chunk})
		off += n
	}
	w.order[r], w.sizes[r] = order, off
	return off, nil
}

// writeTensor writes one tensor item, streaming its bytes from src.
func (w *Writer) writeTensor(ctx context.Context, out io.Writer, pc Piece, src Source) (int64, error) {
	rc, err := src.Tensor(ctx, pc)
	if err != nil {
		return 0, &ItemError{Item: pc.Item, Tensor: -1, FromSource: true, Err: err}
	}
	n, err := WriteTensor(out, w.Spec(pc), rc, w.bufSize)
	cerr := rc.Close()
	if err != nil {
		return 0, &ItemError{Item: pc.Item, Tensor: -1, Err: err}
	}
	if cerr != nil {
		return 0, &ItemError{Item: pc.Item, Tensor: -1, FromSource: true, Err: cerr}
	}
	return n, nil
}

// writeValue writes (or with out nil measures) value item i, streaming
// the bytes of the tensors it holds from src.
func (w *Writer) writeValue(ctx context.Context, out io.Writer, i int, src Source) (int64, error) {
	it := &w.items[i]
	if out == nil {
		n, err := ValueTensorsLength(it.Value, it.ValueTensors)
		if err != nil {
			return 0, &ItemError{Item: i, Tensor: -1, Err: err}
		}
		return n, nil
	}
	if len(it.ValueTensors) == 0 {
		n, err := WriteValue(out, it.Value)
		if err != nil {
			return 0, &ItemError{Item: i, Tensor: -1, Err: err}
		}
		return n, nil
	}
	var open []io.ReadCloser
	closed := false
	defer func() {
		if !closed {
			for _, rc := range open {
				rc.Close()
			}
		}
	}()
	cur := -1
	n, err := WriteValueTensors(out, it.Value, it.ValueTensors, func(k int) (io.Reader, error) {
		cur = k
		rc, err := src.ValueTensor(ctx, i, k)
		if err != nil {
			return nil, err
		}
		open = append(open, rc)
		return rc, nil
	}, w.bufSize)
	if err != nil { // a failure opening tensor cur too
		return 0, &ItemError{Item: i, Tensor: cur, Err: err}
	}
	closed = true
	var first error
	for _, rc := range open {
		if err := rc.Close(); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return 0, &ItemError{Item: i, Tensor: -1, FromSource: true, Err: first}
	}
	return n, nil
}

// Metadata returns the checkpoint's metadata, once every rank's file is
// written or measured (ErrInvalid before).
func (w *Writer) Metadata() (*Metadata, error) {
	md := w.md
	md.Order = nil
	for r, order := range w.order {
		if w.sizes[r] < 0 {
			return nil, fmt.Errorf("%w: rank %d is neither written nor measured", ErrInvalid, r)
		}
		md.Order = append(md.Order, order...)
	}
	return &md, nil
}
