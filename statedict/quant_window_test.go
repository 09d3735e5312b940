package statedict

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestQuantStreamWindow: a small Read of a quantized weight decodes a
// window ahead and serves the next reads from it: quantWindow bytes for
// block FP8 (any element boundary will do), the rest of the 32-row group
// for gpt-oss MXFP4 (so that the reads after it start on whole groups).
// A window of a few bytes (a chunk edge taken for one) passes any test
// of the bytes alone.
func TestQuantStreamWindow(t *testing.T) {
	const rows, cols = 2048, 2048 // 8 MiB of bf16: more than one window
	codes := bytes.Repeat([]byte{0x38, 0xb8, 0x40, 0x01}, rows*cols/4)
	scales := make([]byte, 4*16*16)
	for i := 0; i < len(scales); i += 4 {
		binary.LittleEndian.PutUint32(scales[i:], 0x3c000000) // 2^-7
	}
	const e, r, g = 2, 64, 4 // MXFP4: output [2, 128, 64], a group of 32 rows is 4 KiB
	for _, tc := range []struct {
		name    string
		entries [][4]any
		want    int64 // bytes decoded by the first 100-byte Read
	}{
		{"w.weight", [][4]any{{"w.weight", "F8_E4M3", []int{rows, cols}, codes}, {"w.weight_scale_inv", "F32", []int{16, 16}, scales}}, quantWindow},
		{"x", [][4]any{{"x_blocks", "U8", []int{e, r, g, 16}, make([]byte, e*r*g*16)}, {"x_scales", "U8", []int{e, r, g}, bytes.Repeat([]byte{127}, e*r*g)}}, 32 * r * 2},
	} {
		path := filepath.Join(t.TempDir(), "m.safetensors")
		writeSTFile(t, path, tc.entries)
		ck, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		x := ck.Tensor(tc.name)
		src, ok := x.Storage.src.(*quantSource)
		if !ok {
			t.Fatalf("%s is not a dequantized weight (%T)", tc.name, x.Storage.src)
		}
		if err := src.prepare(); err != nil {
			t.Fatal(err)
		}
		q := &quantStream{s: src, end: src.numel * int64(src.dt.Size())}
		n, err := q.Read(make([]byte, 100))
		if err != nil || n != 100 {
			t.Fatalf("%s: Read of 100 bytes: %d, %v", tc.name, n, err)
		}
		if got := int64(n + len(q.pending)); got != tc.want {
			t.Errorf("%s: the first small Read decoded %d bytes, want %d", tc.name, got, tc.want)
		}
		ck.Close()
	}
}

// writeSTFile writes a safetensors file of {name, dtype, shape, data} entries.
func writeSTFile(t *testing.T, path string, entries [][4]any) {
	t.Helper()
	hdr := map[string]any{}
	off := 0
	var data bytes.Buffer
	for _, en := range entries {
		b := en[3].([]byte)
		hdr[en[0].(string)] = map[string]any{"dtype": en[1], "shape": en[2], "data_offsets": []int{off, off + len(b)}}
		off += len(b)
		data.Write(b)
	}
	h, _ := json.Marshal(hdr)
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	out.Write(data.Bytes())
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
