package statedict

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
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

// TestQuantReadAtOwnCodes: ReadAt in order in reads of one decode chunk
// or less (a diff's: one goroutine a pair) reads just each read's codes,
// with nothing read ahead, so the codes stay in the cache until decoded;
// a read of several chunks (more than one worker) still reads the next
// span ahead. The bytes are those of one whole read either way, and the
// small reads allocate nothing.
func TestQuantReadAtOwnCodes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const rows, cols = 2048, 2048
	codes := make([]byte, rows*cols)
	for i := range codes {
		codes[i] = byte(i*7 + i/cols)
		if codes[i]&0x7f == 0x7f { // NaN
			codes[i] = 0x38
		}
	}
	scales := make([]byte, 4*16*16)
	for i := 0; i < len(scales); i += 4 {
		binary.LittleEndian.PutUint32(scales[i:], 0x3c000000+uint32(i)<<12)
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	writeSTFile(t, path, [][4]any{{"w.weight", "F8_E4M3", []int{rows, cols}, codes}, {"w.weight_scale_inv", "F32", []int{16, 16}, scales}})
	ck, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	x := ck.Tensor("w.weight")
	want, err := x.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	src := x.Storage.src.(*quantSource)
	for _, read := range []int64{1 << 16, 1 << 12, 2 * quantChunk} { // elements a read
		got := make([]byte, 0, len(want))
		p := make([]byte, 2*read)
		for off := int64(0); off < int64(len(want)); off += 2 * read {
			n, err := src.ReadAt(p, off)
			if err != nil && !(err == io.EOF && off+int64(n) == int64(len(want))) {
				t.Fatalf("read %d at %d: %d, %v", read, off, n, err)
			}
			got = append(got, p[:n]...)
			src.mu.Lock()
			ahead, sp := src.ahead, src.span
			src.mu.Unlock()
			if last := off+int64(n) >= int64(len(want)); read < quantChunk && !last {
				if ahead != nil {
					t.Fatalf("reads of %d elements: a span read ahead after the read at %d", read, off)
				}
				if sp == nil || sp.e-sp.b != int64(n)/2 {
					t.Fatalf("reads of %d elements: the kept span after the read at %d is not its %d codes", read, off, n/2)
				}
			} else if read >= quantChunk && off == 2*read && ahead == nil {
				t.Fatalf("reads of %d elements (2 workers): nothing read ahead", read)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reads of %d elements: bytes differ from ReadAll's", read)
		}
	}
	// Such reads allocate nothing (their span's struct reused): a diff
	// makes one for every 64 Ki elements, and garbage is fresh pages.
	p, off := make([]byte, 1<<17), int64(0)
	if n := testing.AllocsPerRun(100, func() {
		if _, err := src.ReadAt(p, off); err != nil {
			t.Fatal(err)
		}
		off = (off + int64(len(p))) % int64(len(want))
	}); n >= 1 {
		t.Errorf("a ReadAt of 64 Ki elements in order: %.1f allocations", n)
	}
}
