package statedict

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// boxOf extracts the box [lo, hi) from a tensor's C-order bytes.
func boxOf(full []byte, shape, lo, hi []int64, es int) []byte {
	var out []byte
	nd := len(shape)
	if nd == 0 {
		return append(out, full...)
	}
	for _, h := range hi {
		_ = h
	}
	idx := append([]int64(nil), lo...)
	for d := range lo {
		if lo[d] >= hi[d] {
			return nil
		}
	}
	for {
		var off int64
		for d := range idx {
			off = off*shape[d] + idx[d]
		}
		out = append(out, full[off*int64(es):(off+1)*int64(es)]...)
		d := nd - 1
		for ; d >= 0; d-- {
			idx[d]++
			if idx[d] < hi[d] {
				break
			}
			idx[d] = lo[d]
		}
		if d < 0 {
			return out
		}
	}
}

// boxes returns slices worth testing on shape: each rank's ChunkRange
// along every dimension, and an inner box.
func boxes(shape []int64) [][]Range {
	var out [][]Range
	for d := range shape {
		for r := 0; r < 3; r++ {
			rs := make([]Range, len(shape))
			for i := range shape {
				rs[i] = Range{0, shape[i]}
			}
			rs[d] = ChunkRange(shape[d], r, 3)
			out = append(out, rs)
		}
	}
	inner := make([]Range, len(shape))
	for i, n := range shape {
		inner[i] = Range{n / 3, n - n/4}
	}
	return append(out, inner, nil)
}

func checkSlices(t *testing.T, ck *Checkpoint) int {
	t.Helper()
	n := 0
	for _, tn := range ck.Tensors {
		if tn.Storage == nil || tn.Layout != Strided || tn.Quant != nil || tn.Meta {
			continue
		}
		full, err := tn.ReadAll()
		if err != nil {
			continue // unreadable fixtures are tested elsewhere
		}
		for _, b := range boxes(tn.Shape) {
			lo, hi, err := sliceBox(tn, b)
			if err != nil {
				t.Fatalf("%s %v: %v", tn.Name, b, err)
			}
			want := boxOf(full, tn.Shape, lo, hi, tn.DType.Size())
			s, err := tn.Slice(b...)
			if err != nil {
				t.Fatalf("%s %v: %v", tn.Name, b, err)
			}
			got, err := s.ReadAll()
			if err != nil {
				t.Fatalf("%s %v: %v", tn.Name, b, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s %v: stream differs", tn.Name, b)
			}
			ra, err := s.Storage.ReaderAt()
			if err != nil {
				t.Fatal(err)
			}
			got2 := make([]byte, len(want))
			if _, err := ra.ReadAt(got2, 0); err != nil && err != io.EOF {
				t.Fatalf("%s %v: ReadAt: %v", tn.Name, b, err)
			}
			if !bytes.Equal(got2, want) {
				t.Errorf("%s %v: ReadAt differs", tn.Name, b)
			}
			n++
		}
	}
	return n
}

// TestSliceEveryFormat slices every tensor of the fixtures of every
// format (views, big-endian files, shards and DCP chunks included) and
// compares with the same box cut from the whole tensor.
func TestSliceEveryFormat(t *testing.T) {
	paths := []string{
		filepath.Join(dcpFixtures, "basic"),
		filepath.Join(sliceFixtures, "model.safetensors"),
		filepath.Join(sliceFixtures, "zip_basic.pt"),
		filepath.Join(sliceFixtures, "zip_bigendian.pt"),
		filepath.Join(sliceFixtures, "zip_deflated.pt"),
		filepath.Join(sliceFixtures, "legacy.pt"),
		filepath.Join(sliceFixtures, "tied.pt"),
		filepath.Join(sliceFixtures, "training.pt"),
		filepath.Join(sliceFixtures, "sharded_st"),
		filepath.Join(sliceFixtures, "tar.pt"),
	}
	for _, p := range paths {
		ck, err := Open(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if n := checkSlices(t, ck); n == 0 {
			t.Errorf("%s: no tensor sliced", p)
		}
		ck.Close()
	}
}

func TestSliceBounds(t *testing.T) {
	ck, err := Open(filepath.Join(dcpFixtures, "basic"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	w := ck.Tensor("model.embed.weight")
	for _, b := range [][]Range{{{0, 11}}, {{3, 2}}, {{-1, 2}}, {{0, 1}, {0, 1}, {0, 1}}} {
		if _, err := w.Slice(b...); err == nil {
			t.Errorf("%v: no error", b)
		}
	}
}

func TestChunkRange(t *testing.T) {
	cases := []struct {
		n     int64
		world int
		want  []Range
	}{
		{10, 4, []Range{{0, 3}, {3, 6}, {6, 9}, {9, 10}}},
		{3, 4, []Range{{0, 1}, {1, 2}, {2, 3}, {3, 3}}},
		{8, 2, []Range{{0, 4}, {4, 8}}},
		{0, 2, []Range{{0, 0}, {0, 0}}},
	}
	for _, c := range cases {
		for r, w := range c.want {
			if got := ChunkRange(c.n, r, c.world); got != w {
				t.Errorf("ChunkRange(%d, %d, %d) = %v, want %v", c.n, r, c.world, got, w)
			}
		}
	}
}

func TestSplitRules(t *testing.T) {
	rules, err := ParseSplitRules("*.q_proj.weight=0, *.o_proj.weight=-1,*.bias=replicate,*=0")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]int{"layers.0.attn.q_proj.weight": 0, "layers.0.attn.o_proj.weight": 1, "layers.0.attn.o_proj.bias": -1, "embed.weight": 0}
	for name, want := range cases {
		d, err := SplitDim(rules, &Tensor{Name: name, Shape: []int64{4, 4}})
		if err != nil || d != want {
			t.Errorf("%s: %d, %v; want %d", name, d, err, want)
		}
	}
	if _, err := SplitDim(rules, &Tensor{Name: "x.q_proj.weight"}); err == nil {
		t.Error("a 0-d tensor split along dim 0: no error")
	}
	for _, bad := range []string{"x", "=0", "a=b", "[=0"} {
		if _, err := ParseSplitRules(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// countingReaderAt counts the bytes and calls that reach the file.
type countingReaderAt struct {
	r            io.ReaderAt
	bytes, calls atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	n, err := c.r.ReadAt(p, off)
	c.bytes.Add(int64(n))
	return n, err
}

// TestSliceReadsOnlyItsBytes: a row slice is one read of exactly its
// bytes; a column slice reads exactly its bytes, one read per row.
func TestSliceReadsOnlyItsBytes(t *testing.T) {
	// A safetensors file with one 64x32 float32 tensor.
	data := makeSafetensors(t, 64, 32)
	cr := &countingReaderAt{r: bytes.NewReader(data)}
	ck, err := NewReader(cr, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	w := ck.Tensors[0]
	full, err := w.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for rank := range 4 {
		cr.bytes.Store(0)
		cr.calls.Store(0)
		r := ChunkRange(64, rank, 4)
		got := readSlice(t, w, r)
		if !bytes.Equal(got, full[r.Start*32*4:r.Stop*32*4]) {
			t.Fatal("row slice differs")
		}
		if cr.bytes.Load() != 16*32*4 || cr.calls.Load() != 1 {
			t.Errorf("rank %d rows: %d bytes in %d reads, want %d in 1", rank, cr.bytes.Load(), cr.calls.Load(), 16*32*4)
		}
		cr.bytes.Store(0)
		cr.calls.Store(0)
		readSlice(t, w, Range{0, 64}, ChunkRange(32, rank, 4))
		if cr.bytes.Load() != 64*8*4 || cr.calls.Load() != 64 {
			t.Errorf("rank %d columns: %d bytes in %d reads, want %d in 64", rank, cr.bytes.Load(), cr.calls.Load(), 64*8*4)
		}
	}
}

func readSlice(t *testing.T, tn *Tensor, r ...Range) []byte {
	t.Helper()
	rc, err := tn.OpenSlice(r...)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func makeSafetensors(t *testing.T, rows, cols int) []byte {
	t.Helper()
	n := rows * cols * 4
	hdr := []byte(`{"w":{"dtype":"F32","shape":[` + itoa(rows) + `,` + itoa(cols) + `],"data_offsets":[0,` + itoa(n) + `]}}`)
	for len(hdr)%8 != 0 {
		hdr = append(hdr, ' ')
	}
	var b bytes.Buffer
	l := uint64(len(hdr))
	for i := 0; i < 8; i++ {
		b.WriteByte(byte(l >> (8 * i)))
	}
	b.Write(hdr)
	for i := 0; i < n; i++ {
		b.WriteByte(byte(i * 7))
	}
	return b.Bytes()
}

func itoa(n int) string { return string(bytes.TrimSpace([]byte(formatInt(n)))) }

func formatInt(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}

var _ = os.Remove

const sliceFixtures = "../testdata/fixtures"
