package quant

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestMXFP4T32Bits: for bfloat16 and float16, every E8M0 exponent (NaN
// 0xFF, those giving subnormal products and overflow included) placed in
// the middle tile of three, in the first or the second of two groups a
// call, every code: the AVX-512 kernel (where the CPU has it) and its
// portable twin write exactly the table's values (fp4 * 2^(e-127)
// rounded as dtype.EncodeFloat32) for the tiles they take, stop at the
// group holding an exponent outside their range and leave it and the
// rest untouched; the range is the one where the exponent add is exact
// (the table agrees on every exponent inside it), so no exponent the
// table would round differently is taken.
func TestMXFP4T32Bits(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.BFloat16, dtype.Float16} {
		tab := mxfp4Table(dt)
		k := mxfp4Tab512For(tab)
		lo, hi := int(k.lo[0]), int(k.lo[0]+k.span[0])
		r := rand.New(rand.NewPCG(5, 6))
		const groups, g, ng, ntiles = 4, 1, 2, 3 // groups 1 and 2 of 4
		const rows = 32 * ntiles
		const rowStride = 2 * (32*ntiles + 8) // output rows wider than the tiles
		for e := 0; e < 256; e++ {
			src := make([]byte, rows*groups*16)
			scales := make([]byte, rows*groups)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			for i := range scales {
				scales[i] = byte(r.Uint32()) // other columns: anything
			}
			eg := e % 2 // the group holding e
			for row := 0; row < rows; row++ {
				for gg := 0; gg < ng; gg++ {
					scales[row*groups+g+gg] = byte(lo + r.IntN(hi-lo+1))
				}
				if row/32 == 1 && row%5 == 1 {
					scales[row*groups+g+eg] = byte(e)
				}
			}
			for j := 0; j < 16; j++ { // every code in both nibbles, middle tile
				src[(32+7)*groups*16+(g+eg)*16+j] = byte(j*16 + (15 - j))
			}
			in := e >= lo && e <= hi
			wantTiles := 1
			if in {
				wantTiles = ntiles
			}
			want := bytes.Repeat([]byte{0xA5}, 32*ng*rowStride)
			for tile := 0; tile < ntiles; tile++ {
				for gg := 0; gg < ng; gg++ {
					if tile >= wantTiles && !(tile == 1 && gg < eg) {
						continue // not reached: the stop is at (tile 1, eg)
					}
					for i := 0; i < 32; i++ {
						row := 32*tile + i
						blk := src[(row*groups+g+gg)*16:][:16]
						for el := 0; el < 32; el++ {
							code := blk[el/2] >> (4 * uint(el%2)) & 15
							binary.LittleEndian.PutUint16(want[(32*gg+el)*rowStride+64*tile+2*i:], tab[scales[row*groups+g+gg]][code])
						}
					}
				}
			}
			check := func(name string, got []byte, n int) {
				t.Helper()
				if n != wantTiles {
					t.Fatalf("%s %s exponent %d: %d tiles, want %d", dt, name, e, n, wantTiles)
				}
				if !bytes.Equal(got, want) {
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("%s %s exponent %d: byte %d (output row %d, stored row %d) %#x, want %#x", dt, name, e, i, i/rowStride, i%rowStride/2, got[i], want[i])
						}
					}
				}
			}
			col := make([]byte, ng*rows) // the groups' columns, one after the other
			for row := 0; row < rows; row++ {
				for gg := 0; gg < ng; gg++ {
					col[gg*rows+row] = scales[row*groups+g+gg]
				}
			}
			gotGo := bytes.Repeat([]byte{0xA5}, len(want))
			check("portable", gotGo, mxfp4T32Go(gotGo, rowStride, src[g*16:], groups*16, col, rows, ng, ntiles, k))
			if haveMXFP4Vec512 {
				got := bytes.Repeat([]byte{0xA5}, len(want))
				check("AVX-512", got, mxfp4T32AVX512(&got[0], rowStride, &src[g*16], groups*16, &col[0], rows, ng, ntiles, k))
			}
		}
	}
}

// TestMXFP4PathsAgree: DequantizeTo of an MXFP4 expert weight whose
// scales mix every exponent (NaN and the subnormal and overflowing ones
// in some tiles) writes the same bytes on every path: AVX-512, AVX2
// (bfloat16 only) and the portable table, each forced; ranges start and
// end inside groups and rows.
func TestMXFP4PathsAgree(t *testing.T) {
	const experts, rows, groups = 2, 96 + 20, 3 // 116 stored rows: tiles and a ragged rest
	r := rand.New(rand.NewPCG(7, 8))
	blocks := make([]byte, experts*rows*groups*16)
	scales := make([]byte, experts*rows*groups)
	for i := range blocks {
		blocks[i] = byte(r.Uint32())
	}
	for i := range scales {
		scales[i] = byte(100 + r.IntN(40))
		if r.IntN(300) == 0 {
			scales[i] = byte(r.Uint32()) // now and then any exponent
		}
	}
	// Exponents neither kernel takes, in whole tiles and in the rest.
	scales[50*groups+1], scales[(rows+70)*groups], scales[(rows+3)*groups+2], scales[100*groups] = 255, 0, 253, 1
	c, err := mxfp4TestCodec(experts, rows, groups)
	if err != nil {
		t.Fatal(err)
	}
	h := groups * 32
	total := experts * h * rows
	type path struct {
		name         string
		v512, v2, ok bool
	}
	paths := []path{{"portable", false, false, true}, {"AVX2", false, true, haveFP8Vec}, {"AVX-512", true, false, haveMXFP4Vec512}, {"both", true, true, haveMXFP4Vec512 && haveFP8Vec}}
	defer func(a, b bool) { haveMXFP4Vec512, haveFP8Vec = a, b }(haveMXFP4Vec512, haveFP8Vec)
	for _, dt := range []dtype.DType{dtype.BFloat16, dtype.Float16} {
		for _, rg := range [][2]int{{0, total}, {0, h * rows}, {32 * rows, 64 * rows}, {5*rows + 3, 70*rows + 11}, {h*rows - 40*rows, h*rows + 40*rows}} {
			var ref []byte
			for _, p := range paths {
				if !p.ok {
					continue
				}
				haveMXFP4Vec512, haveFP8Vec = p.v512, p.v2
				out := make([]byte, 2*(rg[1]-rg[0]))
				cb, ce := c.CodeSpan(int64(rg[0]), int64(rg[1]-rg[0]))
				if err := DequantizeTo(c, dt, out, int64(rg[0]), blocks[cb:ce], [][]byte{scales}); err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref = out
					// The portable path against Dequantize + EncodeFloat32.
					f := make([]float32, rg[1]-rg[0])
					if err := c.Dequantize(f, int64(rg[0]), blocks[cb:ce], [][]byte{scales}); err != nil {
						t.Fatal(err)
					}
					enc := make([]byte, len(out))
					dtype.EncodeFloat32(dt, enc, f)
					if !bytes.Equal(enc, out) {
						t.Fatalf("%s %v: portable path differs from Dequantize", dt, rg)
					}
					continue
				}
				if !bytes.Equal(out, ref) {
					t.Errorf("%s %v: %s differs from the portable path", dt, rg, p.name)
				}
			}
		}
	}
}

// mxfp4TestCodec is the codec of a gpt-oss gate_up-like weight
// [experts, rows, groups, 16].
func mxfp4TestCodec(experts, rows, groups int) (Codec, error) {
	shape := []int64{int64(experts), int64(rows), int64(groups), 16}
	blocks := Stored{Name: "x_blocks", DType: dtype.Uint8, Shape: shape}
	scales := Stored{Name: "x_scales", DType: dtype.Uint8, Shape: shape[:3]}
	g, err := mxfp4Group("x", blocks, scales, Config{DType: dtype.BFloat16})
	if err != nil {
		return nil, err
	}
	return g.Codec, nil
}
