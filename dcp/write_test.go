package dcp_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ckpt-dev/ckpt/dcp"
	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/pickle"
	"github.com/ckpt-dev/ckpt/statedict"
)

// memSource serves each tensor's global bytes (int8 elements numbered
// from a per-tensor base), cutting out each piece's box.
type memSource struct {
	items   []dcp.WriteItem
	openErr error // returned by Tensor
	closeOK func() error
	short   bool // give one byte too few
	closed  int
}

type closer struct {
	io.Reader
	s *memSource
}

func (c closer) Close() error {
	c.s.closed++
	if c.s.closeOK != nil {
		return c.s.closeOK()
	}
	return nil
}

// global is tensor i's data: element e is byte 16*i + e (mod 256).
func global(i int, shape []int64) []byte {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	b := make([]byte, n)
	for e := range b {
		b[e] = byte(16*i + e)
	}
	return b
}

// box cuts the C-order box [off, off+sizes) of a tensor of at most 2
// dimensions.
func box(b []byte, shape, off, sizes []int64) []byte {
	switch len(shape) {
	case 0:
		return b
	case 1:
		return b[off[0] : off[0]+sizes[0]]
	}
	var out []byte
	for r := off[0]; r < off[0]+sizes[0]; r++ {
		row := b[r*shape[1] : (r+1)*shape[1]]
		out = append(out, row[off[1]:off[1]+sizes[1]]...)
	}
	return out
}

func (s *memSource) Tensor(_ context.Context, p dcp.Piece) (io.ReadCloser, error) {
	if s.openErr != nil {
		return nil, s.openErr
	}
	it := s.items[p.Item]
	b := box(global(p.Item, it.Spec.Shape), it.Spec.Shape, p.Offsets, p.Sizes)
	if s.short {
		b = b[:len(b)-1]
	}
	return closer{bytes.NewReader(b), s}, nil
}

func (s *memSource) ValueTensor(_ context.Context, i, k int) (io.ReadCloser, error) {
	return closer{bytes.NewReader(global(100+k, s.items[i].ValueTensors[k].Shape)), s}, nil
}

func spec(shape ...int64) dcp.TensorSpec { return dcp.TensorSpec{DType: dtype.Int8, Shape: shape} }

// writeDir writes every rank of w into dir, then the .metadata.
func writeDir(t *testing.T, w *dcp.Writer, src dcp.Source, dir string) {
	t.Helper()
	for r := range w.Ranks() {
		var buf bytes.Buffer
		n, err := w.WriteRank(context.Background(), r, &buf, src)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(buf.Len()) {
			t.Fatalf("rank %d: WriteRank says %d bytes, wrote %d", r, n, buf.Len())
		}
		if err := os.WriteFile(filepath.Join(dir, dcp.FileName(r)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	md, err := w.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	b, err := md.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, dcp.MetadataFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriterBalances: whole tensors go largest first to the rank with
// the fewest bytes (ties to the lowest), after the split tensors' chunks
// are counted; each rank lists its pieces in entry order.
func TestWriterBalances(t *testing.T) {
	items := []dcp.WriteItem{
		{FQN: "a", Tensor: true, Spec: spec(100)},
		{FQN: "b", Tensor: true, Spec: spec(60)},
		{FQN: "c", Tensor: true, Spec: spec(50)},
		{FQN: "d", Tensor: true, Spec: spec(10)},
	}
	w, err := dcp.NewWriter(items, dcp.WithRanks(2))
	if err != nil {
		t.Fatal(err)
	}
	// a -> 0 (100, 0); b -> 1 (100, 60); c -> 1 (100, 110); d -> 0 (110, 110).
	want := [][]string{{"a", "d"}, {"b", "c"}}
	for r := range 2 {
		var got []string
		for _, pc := range w.Pieces(r) {
			got = append(got, items[pc.Item].FQN)
		}
		if !slices.Equal(got, want[r]) {
			t.Errorf("rank %d holds %v, want %v", r, got, want[r])
		}
	}
	// A split tensor's chunks weigh first: 30 bytes on each of ranks 0, 1
	// and 10 on rank 2... so the 25-byte whole tensor goes to rank 2.
	items = []dcp.WriteItem{
		{FQN: "w", Tensor: true, Spec: spec(25)},
		{FQN: "s", Tensor: true, Spec: spec(7, 10), Split: true, Dim: 0},
	}
	if w, err = dcp.NewWriter(items, dcp.WithRanks(3)); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(w.Pieces(0), w.Pieces(1), w.Pieces(2))
	// torch.chunk of 7 over 3: 3, 3, 1.
	if p := w.Pieces(2); len(p) != 2 || p[0].Item != 0 || p[1].Item != 1 || !slices.Equal(p[1].Offsets, []int64{6, 0}) || !slices.Equal(p[1].Sizes, []int64{1, 10}) {
		t.Errorf("pieces %s: want w and s[6:7] on rank 2", got)
	}
	if _, err := dcp.NewWriter([]dcp.WriteItem{{FQN: "x", Tensor: true, Spec: spec(4), Split: true, Dim: 1}}, dcp.WithRanks(2)); !errors.Is(err, dcp.ErrInvalid) {
		t.Errorf("split on a dimension the tensor lacks: %v", err)
	}
}

// TestWriterReadsBack: a checkpoint of whole, split and scalar-split
// tensors and values (one holding a tensor) over three ranks reads back
// through statedict with every element in place, and measuring a rank
// gives the size writing it does.
func TestWriterReadsBack(t *testing.T) {
	tup := pickle.Tuple{int64(1), "x"}
	items := []dcp.WriteItem{
		{FQN: "m.w", Path: []any{"m", "w"}, Tensor: true, Spec: spec(5, 4), Split: true, Dim: 1},
		{FQN: "m.b", Path: []any{"m", "b"}, Tensor: true, Spec: spec(3), Split: true, Dim: 0},
		{FQN: "m.e", Path: []any{"m", "e"}, Tensor: true, Spec: spec(0, 2), Split: true, Dim: 0},
		{FQN: "s", Path: []any{"s"}, Tensor: true, Spec: spec()},
		{FQN: "step", Path: []any{"step"}, Value: int64(7)},
		{FQN: "t", Path: []any{"t"}, Value: &tup},
	}
	pair := pickle.Tuple{spec(2).Ref("0"), "y"}
	items = append(items, dcp.WriteItem{FQN: "pair", Path: []any{"pair"}, Value: &pair, ValueTensors: []dcp.TensorSpec{spec(2)}})
	w, err := dcp.NewWriter(items, dcp.WithRanks(3))
	if err != nil {
		t.Fatal(err)
	}
	// Another process's view: every rank measured, none written.
	m, err := dcp.NewWriter(items, dcp.WithRanks(3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Metadata(); !errors.Is(err, dcp.ErrInvalid) {
		t.Errorf("metadata before the ranks are written: %v", err)
	}
	dir := t.TempDir()
	src := &memSource{items: items}
	writeDir(t, w, src, dir)
	for r := range 3 {
		n, err := m.WriteRank(context.Background(), r, nil, nil)
		fi, serr := os.Stat(filepath.Join(dir, dcp.FileName(r)))
		if err != nil || serr != nil || n != fi.Size() {
			t.Errorf("rank %d: measured %d (%v), written %v (%v)", r, n, err, fi.Size(), serr)
		}
	}
	a, _ := w.Metadata()
	b, _ := m.Metadata()
	ea, _ := a.Encode()
	eb, _ := b.Encode()
	if !bytes.Equal(ea, eb) {
		t.Error("the measured .metadata differs from the written one")
	}
	ck, err := statedict.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for i, it := range items {
		if !it.Tensor {
			continue
		}
		tn := ck.Tensor(it.FQN)
		if tn == nil {
			t.Errorf("%s: not read back", it.FQN)
			continue
		}
		got, err := tn.ReadAll()
		if want := global(i, it.Spec.Shape); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read %v (%v), want %v", it.FQN, got, err, want)
		}
	}
	if pt := ck.Tensor("pair.0"); pt == nil {
		t.Error("the value's tensor is not read back")
	} else if got, err := pt.ReadAll(); err != nil || !bytes.Equal(got, global(100, []int64{2})) {
		t.Errorf("pair.0: %v (%v)", got, err)
	}
	if n := len(ck.Root.(*pickle.Dict).Entries); n != 5 {
		t.Errorf("root has %d keys, want m, s, step, t, pair", n)
	}
}

// TestWriterErrors: the source's failures come back unchanged as such
// (FromSource), the writer's own (a short tensor) are not, both naming
// the item.
func TestWriterErrors(t *testing.T) {
	items := []dcp.WriteItem{{FQN: "v", Value: int64(1)}, {FQN: "a", Tensor: true, Spec: spec(8)}}
	w, err := dcp.NewWriter(items)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		src    *memSource
		source bool
		cause  error
	}{
		{"open", &memSource{items: items, openErr: boom}, true, boom},
		{"close", &memSource{items: items, closeOK: func() error { return boom }}, true, boom},
		{"short", &memSource{items: items, short: true}, false, nil},
	} {
		_, err := w.WriteRank(context.Background(), 0, io.Discard, tc.src)
		var ie *dcp.ItemError
		if !errors.As(err, &ie) || ie.Item != 1 || ie.Tensor != -1 || ie.FromSource != tc.source || tc.cause != nil && !errors.Is(err, tc.cause) {
			t.Errorf("%s: %v (%+v)", tc.name, err, ie)
		}
		if tc.name != "open" && tc.src.closed != 1 {
			t.Errorf("%s: %d readers closed, want 1", tc.name, tc.src.closed)
		}
	}
	if _, err := w.WriteRank(context.Background(), 1, io.Discard, nil); !errors.Is(err, dcp.ErrInvalid) {
		t.Errorf("rank 1 of 1: %v", err)
	}
}

// TestSafetensorsPieces: a tensor split on a dimension of size 0 has no
// chunk; the safetensors layout still lists it, whole on rank 0.
func TestSafetensorsPieces(t *testing.T) {
	items := []dcp.WriteItem{
		{FQN: "e", Tensor: true, Spec: spec(0, 3), Split: true, Dim: 0},
		{FQN: "a", Tensor: true, Spec: spec(4), Split: true, Dim: 0},
	}
	w, err := dcp.NewWriter(items, dcp.WithRanks(2))
	if err != nil {
		t.Fatal(err)
	}
	by := dcp.SafetensorsPieces(w)
	if len(by[0]) != 2 || by[0][1].Item != 0 || !slices.Equal(by[0][1].Sizes, []int64{0, 3}) || len(by[1]) != 1 {
		t.Errorf("pieces %v", by)
	}
	if got := dcp.SafetensorsFile(2, 4); got != "shard-00003-model-00001-of-00001.safetensors" {
		t.Errorf("rank 2 of 4: %s", got)
	}
	md, err := dcp.SafetensorsMetadata(map[string][]int64{"a": {2}})
	if err != nil {
		t.Fatal(err)
	}
	offs, ok, err := dcp.SavedOffsets(md)
	if !ok || err != nil || !slices.Equal(offs["a"], []int64{2}) {
		t.Errorf("saved offsets read back %v %v %v", offs, ok, err)
	}
}
