package verify

import (
	"math"
	"math/rand"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// fill fills b with pseudo-random bytes from seed.
func fill(b []byte, seed uint64) {
	rand.New(rand.NewSource(int64(seed))).Read(b)
}

// TestDecodeChunk: the chunked decoding Compare uses gives what the
// element decoder gives, for every numeric dtype.
func TestDecodeChunk(t *testing.T) {
	for d := dtype.Float64; d <= dtype.Bits16; d++ {
		dec, ok := decoder(d)
		if !ok {
			continue
		}
		const n = 1000
		src := make([]byte, n*d.Size())
		fill(src, uint64(d))
		got, mid := make([]float64, n), make([]float32, n)
		decodeChunk(d, dec, got, mid, src)
		for i := range n {
			want := dec(src[i*d.Size():])
			if math.Float64bits(got[i]) != math.Float64bits(want) && !(math.IsNaN(got[i]) && math.IsNaN(want)) {
				t.Fatalf("%s[%d]: %v, want %v", d, i, got[i], want)
			}
		}
	}
}

// TestQuickClose: quickClose never says close where closeEnough does not.
func TestQuickClose(t *testing.T) {
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 1.001, 1e-300, 1e300, math.MaxFloat64, -math.MaxFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), 5e-324}
	for _, x := range vals {
		for _, y := range vals {
			for _, tol := range [][2]float64{{0, 0}, {1e-3, 0}, {0, 1e-2}, {math.Inf(1), 0}, {0, math.Inf(1)}} {
				if quickClose(x, y, tol[0], tol[1]) && !closeEnough(x, y, tol[0], tol[1]) {
					t.Errorf("quickClose(%v, %v, %v) but not closeEnough", x, y, tol)
				}
			}
		}
	}
}
