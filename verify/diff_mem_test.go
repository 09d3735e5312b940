package verify

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// synthST is a safetensors file made up as it is read: one float32 tensor
// "w" of n elements whose element i is f(i). Nothing of it is held in
// memory but its header.
type synthST struct {
	head []byte
	n    int64
	f    func(i int64) float32
}

func newSynthST(t testing.TB, n int64, f func(int64) float32) *synthST {
	h, err := json.Marshal(map[string]any{"model.layers.0.w": map[string]any{"dtype": "F32", "shape": []int64{n}, "data_offsets": []int64{0, 4 * n}}})
	if err != nil {
		t.Fatal(err)
	}
	head := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	return &synthST{head: append(head, h...), n: n, f: f}
}

func (s *synthST) size() int64 { return int64(len(s.head)) + 4*s.n }

func (s *synthST) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) && off < int64(len(s.head)) {
		p[n] = s.head[off]
		n++
		off++
	}
	for n < len(p) && off < s.size() {
		d := off - int64(len(s.head))
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(s.f(d/4)))
		k := copy(p[n:], b[d%4:])
		n += k
		off += int64(k)
	}
	if n < len(p) {
		return n, fmt.Errorf("EOF at %d", off)
	}
	return n, nil
}

// TestDiffMemoryBounded: a pair of 256 MiB tensors is compared with a few
// MiB allocated in all (the chunk buffers of each comparing goroutine),
// not the tensors: allocation counted by runtime.MemStats.TotalAlloc, which
// whole-tensor reads would raise by gigabytes. The statistics come out
// as the closed form says (B = A + 2^-10 everywhere).
func TestDiffMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 512 MiB of synthetic data")
	}
	const n = 1 << 26 // 256 MiB of float32 a side
	f := func(i int64) float32 { return float32(i%1024) / 8 }
	ga := newSynthST(t, n, f)
	gb := newSynthST(t, n, func(i int64) float32 { return f(i) + 1.0/1024 })
	a, err := statedict.NewReader(ga, ga.size())
	if err != nil {
		t.Fatal(err)
	}
	b, err := statedict.NewReader(gb, gb.size())
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep, err := Diff(context.Background(), a, b)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %d bytes comparing 2 x %d bytes", alloc, 4*n)
	if alloc > 32<<20 {
		t.Errorf("allocated %d bytes to compare two %d-byte tensors: not bounded by the buffers", alloc, 4*n)
	}
	td := rep.Tensors[0]
	if td.Differing != n || math.Abs(float64(td.MaxAbs)-1.0/1024) > 1e-12 || math.Abs(float64(td.RMSE)-1.0/1024) > 1e-12 {
		t.Errorf("differing %d max_abs %v rmse %v, want %d, 2^-10, 2^-10", td.Differing, td.MaxAbs, td.RMSE, n)
	}
}
