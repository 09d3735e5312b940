package verify

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/internal/llamacpp"
	"github.com/ckpt-dev/ckpt/statedict"
)

// memTensor is a contiguous tensor over random bytes in memory.
func memTensor(name string, dt dtype.DType, shape []int64, seed int64) (*statedict.Tensor, []byte) {
	n := int64(dt.Size())
	for _, s := range shape {
		n *= s
	}
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return statedict.NewDerivedTensor(name, dt, shape, bytes.NewReader(b), n, nil), b
}

// TestExpertTensor: an expert weight read one expert at a time
// (expertTensor) gives the bytes statedict's strided reader gives for
// the same llamacpp.ExpertView of its storage, element for element, for
// each parity and element size, whatever the sizes of the reads (a read
// may cut an element or span experts); read as float32 (widen), the
// bfloat16 bytes cast by dtype's bfloat16-to-float32 cast.
func TestExpertTensor(t *testing.T) {
	for _, c := range []struct {
		dt    dtype.DType
		shape []int64
	}{
		{dtype.BFloat16, []int64{3, 37, 70}}, // rows and columns not multiples of the tile
		{dtype.Float32, []int64{2, 64, 66}},
		{dtype.Uint8, []int64{2, 5, 4}},
		{dtype.Float64, []int64{1, 33, 34}},
	} {
		src, _ := memTensor("model.layers.0.mlp.experts.gate_up_proj", c.dt, c.shape, int64(len(c.shape[1:])))
		for parity := -1; parity <= 1; parity++ {
			shape, strides, off, err := llamacpp.ExpertView(src.Shape, src.Strides, parity)
			if err != nil {
				t.Fatal(err)
			}
			ref := *src
			ref.Shape, ref.Strides, ref.Offset = shape, strides, off
			want, err := ref.ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			widens := []bool{false}
			if c.dt == dtype.BFloat16 {
				widens = append(widens, true)
			}
			for _, widen := range widens {
				w := want
				if widen {
					w = make([]byte, 2*len(want))
					dtype.CastBytes(dtype.BFloat16, dtype.Float32)(w, want)
				}
				v, err := expertTensor(src, parity, widen)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(v.Shape, shape) || v.NBytes() != int64(len(w)) {
					t.Fatalf("%s %v parity %d: shape %v, %d bytes; want %v, %d", c.dt, c.shape, parity, v.Shape, v.NBytes(), shape, len(w))
				}
				// Reads of one byte and of 7 cut elements; of 4096 and
				// all take the tiles, into a buffer one byte off their
				// alignment the element by element copy.
				for _, step := range []int{1, 7, 4096, len(w)} {
					for _, shift := range []int{0, 1} {
						got := readInSteps(t, v, step, shift)
						if !bytes.Equal(got, w) {
							t.Fatalf("%s %v parity %d widen %v, reads of %d bytes (shift %d): not the strided view's bytes", c.dt, c.shape, parity, widen, step, shift)
						}
					}
				}
			}
		}
	}
}

// readInSteps reads v's storage in order, step bytes a read, into a
// buffer shift bytes into an allocation.
func readInSteps(t *testing.T, v *statedict.Tensor, step, shift int) []byte {
	t.Helper()
	r, err := v.Storage.ReaderAt()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, int(v.NBytes())+shift)[shift:]
	for off := 0; off < len(out); off += step {
		n, err := r.ReadAt(out[off:min(off+step, len(out))], int64(off))
		if n != min(step, len(out)-off) || err != nil && err != io.EOF {
			t.Fatalf("read at %d: %d bytes, %v", off, n, err)
		}
	}
	return out
}

// TestExpertTensorRefused: what is not a stacked expert weight, an odd
// number of outputs to split, an expert over the slab bound, a widening
// of a dtype other than bfloat16 are refused with a reason; a truncated
// source fails the read naming the tensor.
func TestExpertTensorRefused(t *testing.T) {
	for _, c := range []struct {
		dt     dtype.DType
		shape  []int64
		parity int
		widen  bool
		want   string
	}{
		{dtype.BFloat16, []int64{4, 6}, -1, false, "[experts, in, out]"},
		{dtype.BFloat16, []int64{2, 4, 5}, 0, false, "odd number of outputs"},
		{dtype.BFloat16, []int64{2, 1 << 15, 1 << 15}, -1, false, "over"},
		{dtype.Float32, []int64{2, 4, 4}, -1, true, "float32 bit for bit"},
	} {
		src := statedict.NewDerivedTensor("w", c.dt, c.shape, bytes.NewReader(nil), 0, nil)
		if _, err := expertTensor(src, c.parity, c.widen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want %q", c.dt, c.shape, err, c.want)
		}
	}
	// Storage shorter than the shape says: the second expert is cut.
	full, b := memTensor("model.layers.1.mlp.experts.down_proj", dtype.BFloat16, []int64{2, 8, 8}, 1)
	short := statedict.NewDerivedTensor(full.Name, full.DType, full.Shape, bytes.NewReader(b[:len(b)-10]), int64(len(b)), nil)
	v, err := expertTensor(short, -1, false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.ReadAll()
	var se *statedict.Error
	if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), "down_proj") {
		t.Errorf("truncated expert: %v", err)
	}
}
