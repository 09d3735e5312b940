package statedict

import (
	"bytes"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dtype"
	"github.com/ckpt-dev/ckpt/quant"
)

// TestQuantSpanMXFP4: a gpt-oss MXFP4 weight (5 experts) is read with
// its scales a span (expert) at a time, never whole, and the bytes it
// serves, streamed in order (each next expert read ahead) and by ReadAt
// at offsets out of order (no read-ahead used, or one given back), equal
// the codec's decode from the whole scales (quant.DequantizeTo, the
// path the spans do not take); after the stream every span's buffers
// are given back and nothing is read ahead.
func TestQuantSpanMXFP4(t *testing.T) {
	const e, r, g = 5, 96, 4
	ck, blocks, scales := mxfp4Fixture(t, e, r, g, 11, func(sc []byte) { sc[2*r*g+7] = 255 }) // a tile off the vector path
	defer ck.Close()
	x := ck.Tensor("x")
	if x == nil {
		t.Fatal("no dequantized x")
	}
	src, ok := x.Storage.src.(*quantSource)
	if !ok {
		t.Fatalf("x is read by %T", x.Storage.src)
	}
	want := make([]byte, src.numel*2)
	if err := quant.DequantizeTo(src.codec, dtype.BFloat16, want, 0, blocks, [][]byte{scales}); err != nil {
		t.Fatal(err)
	}
	rc, err := x.Open()
	if err != nil {
		t.Fatal(err)
	}
	if src.compData != nil || len(src.compAt) != 1 {
		t.Fatalf("scales read whole (%d companions held, %d read by span)", len(src.compData), len(src.compAt))
	}
	got := make([]byte, 0, len(want))
	buf := make([]byte, 3*r*32*2+4096) // 3 groups and a bit: reads cross experts
	for {
		n, err := io.ReadFull(rc, buf)
		got = append(got, buf[:n]...)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	rc.Close()
	if !bytes.Equal(got, want) {
		t.Fatal("streamed bytes differ from the whole-scales decode")
	}
	if src.span != nil || src.ahead != nil {
		t.Errorf("after the stream: span %v, read ahead %v", src.span != nil, src.ahead != nil)
	}
	unit := int64(g * 32 * r * 2)
	for _, rg := range [][2]int64{{3*unit + 100, 3*unit + 5000}, {unit - 64, unit + 64}, {0, 2 * unit}, {4 * unit, 5 * unit}, {2*unit + 6, 2*unit + 4000}} {
		p := make([]byte, rg[1]-rg[0])
		if _, err := src.ReadAt(p, rg[0]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p, want[rg[0]:rg[1]]) {
			t.Errorf("ReadAt %v differs from the whole-scales decode", rg)
		}
	}
}

// mxfp4Fixture opens a safetensors file of a gpt-oss MXFP4 weight x (e
// experts, r stored rows, g groups; random codes, exponents near 127,
// then edit applied to the scales) and returns it with the stored bytes.
func mxfp4Fixture(t *testing.T, e, r, g int, seed uint64, edit func([]byte)) (*Checkpoint, []byte, []byte) {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, seed+1))
	blocks := make([]byte, e*r*g*16)
	for i := range blocks {
		blocks[i] = byte(rnd.Uint32())
	}
	scales := make([]byte, e*r*g)
	for i := range scales {
		scales[i] = byte(112 + rnd.IntN(24))
	}
	if edit != nil {
		edit(scales)
	}
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeSTFile(t, path, [][4]any{
		{"x_blocks", "U8", []int{e, r, g, 16}, blocks},
		{"x_scales", "U8", []int{e, r, g}, scales},
		{"plain", "U8", []int{4}, []byte{1, 2, 3, 4}},
	})
	ck, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return ck, blocks, scales
}
