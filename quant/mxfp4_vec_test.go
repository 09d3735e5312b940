package quant

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestMXFP4VecBits: for every E8M0 exponent the vector path takes and
// every code, the kernel (AVX2 where the CPU has it), its portable twin
// and the bfloat16 table (fp4 * 2^(e-127) rounded by dtype.F32ToBF16)
// agree bit for bit, over random 16-row groups whose rows mix scales;
// exponents outside the range are refused by mxfp4VecAdj.
func TestMXFP4VecBits(t *testing.T) {
	tab := mxfp4Table(dtype.BFloat16)
	r := rand.New(rand.NewPCG(3, 4))
	const srcStride, rowStride = 16 * 3, 2 * 20 // 3 groups a stored row; output rows of 20
	for e := mxfp4VecLo; e <= mxfp4VecHi; e++ {
		src := make([]byte, 16*srcStride)
		scales := make([]byte, 16)
		for k := range scales {
			scales[k] = byte(e)
			if k%3 == 1 {
				scales[k] = byte(mxfp4VecLo + r.IntN(mxfp4VecHi-mxfp4VecLo+1))
			}
			blk := src[k*srcStride : k*srcStride+16]
			for j := range blk {
				blk[j] = byte(r.Uint32())
				if k == 0 {
					blk[j] = byte(j*16 + j) // every code in low and high nibbles
				}
			}
		}
		var adj [16]uint16
		if !mxfp4VecAdj(&adj, scales, 1) {
			t.Fatalf("exponents %v refused", scales)
		}
		want := make([]byte, 32*rowStride)
		for k := 0; k < 16; k++ {
			for el := 0; el < 32; el++ {
				code := src[k*srcStride+el/2] >> (4 * uint(el%2)) & 15
				binary.LittleEndian.PutUint16(want[el*rowStride+2*k:], tab[scales[k]][code])
			}
		}
		got, gotGo := make([]byte, len(want)), make([]byte, len(want))
		copy(got, want)
		copy(gotGo, want)
		for i := range got[:32*rowStride] { // the kernel writes 32 bytes a row
			if i%rowStride < 32 {
				got[i], gotGo[i] = 0xAA, 0xAA
			}
		}
		mxfp4T16Go(gotGo, rowStride, src, srcStride, &adj)
		if !bytes.Equal(gotGo, want) {
			t.Fatalf("exponent %d: portable path differs from the table", e)
		}
		if haveFP8Vec {
			mxfp4T16AVX2(&got[0], rowStride, &src[0], srcStride, &adj, mxfp4Vec)
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("exponent %d: kernel differs from the table at byte %d (output row %d, stored row %d)", e, i, i/rowStride, i%rowStride/2)
					}
				}
			}
		}
	}
	var adj [16]uint16
	for _, e := range []byte{0, 1, 253, 254, 255} {
		sc := bytes.Repeat([]byte{127}, 16)
		sc[15] = e
		if mxfp4VecAdj(&adj, sc, 1) {
			t.Errorf("exponent %d taken by the vector path", e)
		}
	}
}
