package statedict_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// TestQuantStreamMXFP4Reads: a gpt-oss MXFP4 weight (4 experts, whose
// transposed rows need their expert's codes) streamed by readers that
// fill buffers of odd sizes, as a file writer does (reads cut at experts
// and 32-row groups, the rest of a buffer served from a one-group
// window), gives the bytes a single whole read gives; so does the
// stream's Read at every size from a few bytes to more than an expert.
func TestQuantStreamMXFP4Reads(t *testing.T) {
	const e, r, g = 4, 512, 16 // output [4, 512, 512] bf16, 512 KiB an expert
	r0 := rand.New(rand.NewPCG(7, 8))
	blocks := make([]byte, e*r*g*16)
	for i := range blocks {
		blocks[i] = byte(r0.Uint32())
	}
	scales := make([]byte, e*r*g)
	for i := range scales {
		scales[i] = byte(118 + r0.IntN(12))
	}
	scales[5] = 0 // a group off the vector path
	path := filepath.Join(t.TempDir(), "model.safetensors")
	writeST(t, path, []stEntry{
		{"x_blocks", "U8", []int{e, r, g, 16}, blocks},
		{"x_scales", "U8", []int{e, r, g}, scales},
	})
	ck, err := statedict.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	x := ck.Tensor("x")
	if x == nil {
		t.Fatalf("no dequantized x among %d tensors", len(ck.Tensors))
	}
	whole, err := x.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(whole) != e*g*32*r*2 {
		t.Fatalf("%d bytes, want %d", len(whole), e*g*32*r*2)
	}
	for _, buf := range []int{1<<20 + 4097, 3 << 20, 1 << 20, 100 << 10, 32<<10 + 1, 4093} {
		rc, err := x.Open()
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 0, len(whole))
		b := make([]byte, buf)
		for {
			// Fill b as atomicfile's writer does: read into what is left of it.
			n := 0
			var err error
			for n < len(b) && err == nil {
				var k int
				k, err = rc.Read(b[n:])
				n += k
			}
			got = append(got, b[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rc.Close()
		if !bytes.Equal(got, whole) {
			i := 0
			for i < len(got) && i < len(whole) && got[i] == whole[i] {
				i++
			}
			t.Fatalf("buffers of %d bytes: the stream differs from the whole read at byte %d (%d bytes streamed, %d whole)", buf, i, len(got), len(whole))
		}
	}
}

type stEntry struct {
	name, dtype string
	shape       []int
	data        []byte
}

// writeST writes a safetensors file of the entries, in order.
func writeST(t *testing.T, path string, entries []stEntry) {
	t.Helper()
	hdr := map[string]any{}
	off := 0
	for _, en := range entries {
		hdr[en.name] = map[string]any{"dtype": en.dtype, "shape": en.shape, "data_offsets": []int{off, off + len(en.data)}}
		off += len(en.data)
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	for _, en := range entries {
		out.Write(en.data)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
