package convert

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// castTargets are the dtypes --dtype accepts.
var castTargets = []dtype.DType{dtype.Float64, dtype.Float32, dtype.Float16, dtype.BFloat16}

// TestCastReaderMatchesElementwise checks the chunked, parallel cast
// against the element-by-element definition (toFloat32, putFloat32; those
// are checked against torch in TestFloat16Rounding and the interop
// tests), for every source and target dtype, on sizes around the chunk
// and the parallel threshold, read through odd-sized pieces.
func TestCastReaderMatchesElementwise(t *testing.T) {
	sources := append(append([]dtype.DType{}, castTargets...), dtype.Float8E4M3FN, dtype.Float8E5M2)
	for _, from := range sources {
		for _, to := range castTargets {
			if from == to {
				continue
			}
			for _, n := range []int{0, 1, castPiece - 1, 2*castPiece + 3, castChunk, castChunk + 5, 2*castChunk + castPiece + 1} {
				src := make([]byte, n*from.Size())
				fill(src, uint64(n)+uint64(len(from.String())))
				want := make([]byte, n*to.Size())
				for i := range n {
					dtype.PutFloat32(to, want[i*to.Size():], dtype.ToFloat32(from, src[i*from.Size():]))
				}
				// Reads of up to 100 KB (a unit of castUnit at most,
				// or none: through castReader's own buffer), and of up
				// to 5 MB (whole chunks into the caller's buffer).
				for _, most := range []int{100003, 5 << 20} {
					got, err := readPieces(newCastReader(bytes.NewReader(src), from, to), len(want), most)
					if err != nil {
						t.Fatalf("%s -> %s, %d elements: %v", from, to, n, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s -> %s, %d elements, reads up to %d: differs from the element-by-element cast", from, to, n, most)
					}
				}
			}
		}
	}
}

// TestCastReaderTruncated: a source that ends inside an element is an
// error, not a silently shorter tensor.
func TestCastReaderTruncated(t *testing.T) {
	_, err := io.ReadAll(newCastReader(bytes.NewReader(make([]byte, 4*castChunk+2)), dtype.Float32, dtype.BFloat16))
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
}

func BenchmarkCast(b *testing.B) {
	const n = 16 << 20 // elements
	for _, c := range []struct{ from, to dtype.DType }{
		{dtype.Float32, dtype.BFloat16}, {dtype.Float32, dtype.Float16},
		{dtype.BFloat16, dtype.Float32}, {dtype.Float16, dtype.Float32},
	} {
		// Weights-like values: normally distributed float32, stored in
		// the source dtype.
		rng := rand.New(rand.NewPCG(9, 9))
		src := make([]byte, n*c.from.Size())
		for i := range n {
			dtype.PutFloat32(c.from, src[i*c.from.Size():], float32(rng.NormFloat64()*0.02))
		}
		b.Run(c.from.String()+"-"+c.to.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if _, err := io.Copy(io.Discard, newCastReader(bytes.NewReader(src), c.from, c.to)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// readPieces reads r to its end into a buffer of n bytes and one more,
// in reads of lengths from 1 to most bytes that change from call to call,
// each given no room past its end (a reader that wrote past the length
// it was given would go unnoticed in one buffer).
func readPieces(r io.Reader, n, most int) ([]byte, error) {
	buf := make([]byte, n+1)
	got, k := 0, 0
	for {
		k = (k*7 + 13) % most
		m := min(len(buf)-got, 1+k)
		c, err := r.Read(buf[got : got+m : got+m])
		got += c
		if err == io.EOF {
			return buf[:got], nil
		}
		if err != nil {
			return buf[:got], err
		}
		if got == len(buf) {
			return buf, nil
		}
	}
}

// fill fills b with pseudo-random bytes from seed.
func fill(b []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}
