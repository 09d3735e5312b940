package quant

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
)

// TestSubCodecMatchesWhole: for a gpt-oss MXFP4 weight of 3 experts
// (stored rows a whole number of tiles and a ragged rest; exponents no
// kernel takes in some tiles), the Span of a range decodes, from only
// the companion bytes its CompRanges name, prepared (scale columns made
// once) or not, exactly the bytes the weight's codec decodes from the
// whole scales, for bfloat16, float16 and float32, on the AVX-512 path
// and with it forced off; its Shift and CompRanges are those of whole
// experts. A codec without spans (block FP8) reports none.
func TestSubCodecMatchesWhole(t *testing.T) {
	const experts, rows, groups = 3, 64 + 20, 3
	r := rand.New(rand.NewPCG(9, 10))
	blocks := make([]byte, experts*rows*groups*16)
	scales := make([]byte, experts*rows*groups)
	for i := range blocks {
		blocks[i] = byte(r.Uint32())
	}
	for i := range scales {
		scales[i] = byte(110 + r.IntN(30))
	}
	scales[(rows+40)*groups+1], scales[(2*rows+5)*groups] = 255, 1
	c, err := mxfp4TestCodec(experts, rows, groups)
	if err != nil {
		t.Fatal(err)
	}
	h := int64(groups * 32)
	unit := h * rows // elements of one expert
	defer func(v bool) { haveMXFP4Vec512 = v }(haveMXFP4Vec512)
	for _, v512 := range []bool{false, true} {
		if v512 && !haveMXFP4Vec512 {
			continue
		}
		haveMXFP4Vec512 = v512
		for _, rg := range [][2]int64{{0, unit}, {unit, 2 * unit}, {unit + 32*rows, unit + 64*rows}, {unit + 7, 3*unit - 5}, {2*unit + 3*rows + 1, 2*unit + 90*rows}} {
			sp, ok := SubCodec(c, rg[0], rg[1]-rg[0])
			if !ok {
				t.Fatal("MXFP4: no span")
			}
			x0, x1 := rg[0]/unit, (rg[1]+unit-1)/unit
			sg := int64(rows * groups)
			if sp.Shift != x0*unit || sp.Len != (x1-x0)*unit || len(sp.CompRanges) != 1 || sp.CompRanges[0] != [2]int64{x0 * sg, x1 * sg} {
				t.Fatalf("%v: shift %d, companions %v; want %d, [%d %d]", rg, sp.Shift, sp.CompRanges, x0*unit, x0*sg, x1*sg)
			}
			part := append([]byte(nil), scales[x0*sg:x1*sg]...)
			prepared, _ := sp.Prepare([][]byte{part}, nil)
			cb, ce := c.CodeSpan(rg[0], rg[1]-rg[0])
			for _, dt := range []dtype.DType{dtype.BFloat16, dtype.Float16, dtype.Float32} {
				n := int(rg[1] - rg[0])
				want := make([]byte, n*dt.Size())
				if err := DequantizeTo(c, dt, want, rg[0], blocks[cb:ce], [][]byte{scales}); err != nil {
					t.Fatal(err)
				}
				for name, sc := range map[string]Codec{"span": sp.Codec, "prepared": prepared} {
					got := make([]byte, len(want))
					if err := DequantizeTo(sc, dt, got, rg[0]-sp.Shift, blocks[cb:ce], [][]byte{part}); err != nil {
						t.Fatalf("%s %v %s: %v", name, rg, dt, err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("%s %v %s (AVX-512 %v): differs from the whole codec", name, rg, dt, v512)
					}
				}
			}
		}
	}
	w := Stored{Name: "w", DType: dtype.Float8E4M3FN, Shape: []int64{256, 256}}
	fp8, err := newGrid(w, Stored{Name: "s", DType: dtype.Float32, Shape: []int64{2, 2}}, 128, 128, dtype.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := SubCodec(fp8, 0, 1); ok {
		t.Error("block FP8 reports spans")
	}
}

// TestScaleColumns: scaleColumns transposes each expert's [rows, groups]
// scales to [groups, rows], for rows and groups multiples of its 8x8
// blocks or not.
func TestScaleColumns(t *testing.T) {
	for _, d := range [][2]int{{150, 5}, {150, 21}, {64, 16}, {7, 9}} {
		testScaleColumns(t, d[0], d[1])
	}
}

func testScaleColumns(t *testing.T, rows, groups int) {
	const experts = 2
	l := MXFP4Layout{Prefix: []int{experts, rows}, Groups: groups}
	s := make([]byte, experts*rows*groups)
	for i := range s {
		s[i] = byte(i*7 + i/13)
	}
	d := make([]byte, len(s))
	l.scaleColumns(d, s)
	for x := 0; x < experts; x++ {
		for i := 0; i < rows; i++ {
			for g := 0; g < groups; g++ {
				if got, want := d[(x*groups+g)*rows+i], s[(x*rows+i)*groups+g]; got != want {
					t.Fatalf("%dx%d: expert %d row %d group %d: %d, want %d", rows, groups, x, i, g, got, want)
				}
			}
		}
	}
}
