package convert

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ckpt-dev/ckpt/quant"
	"github.com/ckpt-dev/ckpt/statedict"
)

// synthBF16 is a safetensors file of n bf16 weights [rows, cols] made up
// as it is read: nothing of it is held but its header.
type synthBF16 struct {
	head       []byte
	n          int
	rows, cols int64
}

func newSynthBF16(t testing.TB, n int, rows, cols int64) *synthBF16 {
	m := map[string]any{}
	sz := 2 * rows * cols
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("model.layers.%d.mlp.down_proj.weight", i)] = map[string]any{
			"dtype": "BF16", "shape": []int64{rows, cols}, "data_offsets": []int64{int64(i) * sz, int64(i+1) * sz}}
	}
	h, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	head := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return &synthBF16{head: append(head, h...), n: n, rows: rows, cols: cols}
}

func (s *synthBF16) size() int64 { return int64(len(s.head)) + int64(s.n)*2*s.rows*s.cols }

func (s *synthBF16) ReadAt(p []byte, off int64) (int, error) {
	n := copy(p, s.head[min(off, int64(len(s.head))):])
	off += int64(n)
	for ; n < len(p) && off < s.size(); n, off = n+1, off+1 {
		e := (off - int64(len(s.head))) / 2
		// bf16 of (e%251 - 125)/64: a sign, an exponent, a mantissa.
		v := float32(e%251-125) / 64
		b := uint16(math.Float32bits(v) >> 16)
		p[n] = byte(b >> (8 * uint((off-int64(len(s.head)))%2)))
	}
	if n < len(p) {
		return n, fmt.Errorf("EOF at %d", off)
	}
	return n, nil
}

// TestQuantizeMemoryBounded: --quantize of a model of many weights
// allocates a few buffers in all, not a code cache (or a set of row
// buffers) per weight: 48 weights of 2 MiB of FP8 codes each would hold
// 96 MiB of caches kept after their weight was written, and allocate as
// much again in source rows. Counted by runtime.MemStats.TotalAlloc over
// the conversion, and the peak of the live heap (sampled, the collector
// run often) beside it.
func TestQuantizeMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes 192 MiB of synthetic bf16")
	}
	const weights, rows, cols = 48, 512, 4096
	src := newSynthBF16(t, weights, rows, cols)
	ck, err := statedict.NewReader(src, src.size())
	if err != nil {
		t.Fatal(err)
	}
	spec, err := quant.ParseQuantize("fp8-block")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "q.safetensors")
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := sampleHeap(t)
	sum, err := Convert(context.Background(), ck, out, WithQuantize(spec))
	if err != nil {
		t.Fatal(err)
	}
	live := peak()
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	codes := int64(weights * rows * cols)
	t.Logf("quantized %d weights (%d bytes of codes): allocated %d bytes, live heap peak %d", sum.Quantize.Quantized, codes, alloc, live)
	if sum.Quantize.Quantized != weights {
		t.Fatalf("quantized %d weights, want %d", sum.Quantize.Quantized, weights)
	}
	if alloc > 48<<20 {
		t.Errorf("allocated %d bytes quantizing %d weights: not bounded by a few buffers", alloc, weights)
	}
	if live > 64<<20 {
		t.Errorf("live heap reached %d bytes: not bounded by a few buffers", live)
	}
}

// sampleHeap samples HeapAlloc after a collection every few milliseconds
// until the returned function is called, which returns the peak.
func sampleHeap(t testing.TB) func() uint64 {
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		var m runtime.MemStats
		for {
			select {
			case <-stop:
				done <- peak
				return
			default:
			}
			runtime.GC()
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
		}
	}()
	return func() uint64 { close(stop); return <-done }
}
