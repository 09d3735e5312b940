package pickle

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// Hostile streams of about 1 MB must unpickle (or fail) in time and memory
// linear in their size: total allocation, garbage included, stays under 160
// bytes per input byte (gopickle's MARK alone allocates 256 bytes per 2-byte
// MARK/POP_MARK pair). Several streams reuse memoized values so that naive
// handling would grow quadratically.
func TestAllocationBoundedByInput(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few hundred MB")
	}
	const n = 1 << 20
	bigTuple := func() []byte { // memo 0 = tuple of 50k ints
		b := append([]byte{}, proto...)
		b = append(b, '(')
		for i := 0; i < 50000; i++ {
			b = append(b, 'K', 1)
		}
		return append(b, 't', 'q', 0)
	}
	repeat := func(prefix, unit []byte, end []byte) []byte {
		b := append([]byte{}, prefix...)
		b = append(b, '(')
		for len(b) < n {
			b = append(b, unit...)
		}
		return append(append(b, 'l'), end...)
	}
	cases := map[string][]byte{
		"DUP":           append(append(append([]byte{}, proto...), 'N'), append(bytes.Repeat([]byte{'2'}, n), '.')...),
		"MARK churn":    append(append([]byte{}, proto...), append(bytes.Repeat([]byte{'(', '1'}, n/2), 'N', '.')...),
		"foreign args":  repeat(append(bigTuple(), cat(G("m", "C"), op('q', 1))...), op('h', 1, 'h', 0, 'R'), stop),
		"set of tuple":  repeat(append(bigTuple(), cat(G("builtins", "set"), op('q', 1))...), op('h', 1, 'h', 0, 0x85, 'R'), stop),
		"Size of tuple": repeat(append(bigTuple(), cat(G("torch", "Size"), op('q', 1))...), op('h', 1, 'h', 0, 0x85, 'R'), stop),
		"tensors": repeat(cat(proto, G("torch._utils", "_rebuild_tensor_v2"), op('q', 1),
			T(pid("FloatStorage", "0", "cpu", 1<<20), I(0), ints(make([]int32, 64)...), ints(make([]int32, 64)...), fls, none), op('q', 0)),
			op('h', 1, 'h', 0, 'R'), stop),
		"bytes": repeat(proto, op('C', 0), stop),
		"dict same key": append(append(append([]byte{}, proto...), cat(op('}'), S(string(bytes.Repeat([]byte{'k'}, 1000))), op('q', 0), op('0'))...),
			append(bytes.Repeat(op('h', 0, 'N', 's'), n/4), '.')...),
	}
	for name, in := range cases {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		_, err := Unpickle(in)
		took := time.Since(start)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%-14s %7d bytes in: %8.1f MB allocated, %v, err=%v", name, len(in), float64(alloc)/1e6, took, err)
		if alloc > 160*uint64(len(in)) {
			t.Errorf("%s: %d bytes allocated for %d bytes of input", name, alloc, len(in))
		}
		if took > 5*time.Second {
			t.Errorf("%s: took %v", name, took)
		}
	}
}

// TestPaddingAfterStopNotCopied: what follows STOP is never run, so it is
// not copied either: a 64 MiB pickle of None and zero padding allocates a
// small fraction of its size (it used to allocate a second copy of the
// input for the rewritten stream).
func TestPaddingAfterStopNotCopied(t *testing.T) {
	in := make([]byte, 64<<20)
	copy(in, append(append([]byte{}, proto...), 'N', '.'))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	v, err := Unpickle(in)
	runtime.ReadMemStats(&after)
	if err != nil || v != nil {
		t.Fatalf("got %v, %v", v, err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes allocated for %d bytes of input", alloc, len(in))
	if alloc > uint64(len(in))/16 {
		t.Errorf("%d bytes allocated for %d bytes of input, %d of them after STOP", alloc, len(in), len(in)-len(proto)-2)
	}
}
