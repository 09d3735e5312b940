package statedict

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// transposedExperts is a stacked expert weight [E, in, out] of float32
// element values 0, 1, 2, ..., viewed as [E, out, in] (llamacpp's
// ExpertView), and what that view reads as.
func transposedExperts(e, in, out int64) (*Tensor, []byte, []byte) {
	src := make([]byte, e*in*out*4)
	for i := range e * in * out {
		binary.LittleEndian.PutUint32(src[i*4:], uint32(i))
	}
	want := make([]byte, 0, len(src))
	for x := range e {
		for o := range out {
			for i := range in {
				want = binary.LittleEndian.AppendUint32(want, uint32(x*in*out+i*out+o))
			}
		}
	}
	t := &Tensor{Name: "experts", DType: dtype.Float32, Shape: []int64{e, out, in}, Strides: []int64{in * out, 1, out}}
	return t, src, want
}

// TestStridedWindow reads a transposed view through windows of many
// sizes, smaller and larger than one expert, and through small reads.
func TestStridedWindow(t *testing.T) {
	defer func(w int64) { stridedWindow = w }(stridedWindow)
	tt, src, want := transposedExperts(3, 37, 29)
	for _, w := range []int64{4, 12, 100, 37 * 29 * 4, 37*29*4 + 4, 1 << 20} {
		stridedWindow = w
		for _, chunk := range []int{4, 7, 4096, len(want)} {
			rc := tt.OpenFrom(bytes.NewReader(src))
			got := make([]byte, 0, len(want))
			buf := make([]byte, chunk)
			for {
				n, err := rc.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("window %d, reads of %d: %v", w, chunk, err)
				}
			}
			rc.Close()
			if !bytes.Equal(got, want) {
				t.Fatalf("window %d, reads of %d: the view's bytes differ", w, chunk)
			}
		}
	}
}

// TestStridedTransposeReadsOnce: a transposed view whose experts fit in a
// window reads about its span once (the reader used to read up to 1 MiB
// for every few dozen elements: 715 GB for a 1.66 GB gpt-oss release).
func TestStridedTransposeReadsOnce(t *testing.T) {
	tt, src, want := transposedExperts(4, 512, 640)
	cr := &countingReaderAt{r: bytes.NewReader(src)}
	rc := tt.OpenFrom(cr)
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, err %v; equal %v", len(got), err, bytes.Equal(got, want))
	}
	if n := cr.bytes.Load(); n > 2*int64(len(src)) {
		t.Errorf("read %d bytes of a %d-byte span", n, len(src))
	}
}

// TestStridedTruncated: a source shorter than the view spans is
// ErrTruncated, whatever the window.
func TestStridedTruncated(t *testing.T) {
	tt, src, _ := transposedExperts(2, 8, 8)
	rc := tt.OpenFrom(bytes.NewReader(src[:len(src)-4]))
	defer rc.Close()
	if _, err := io.ReadAll(rc); err == nil || !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
}
