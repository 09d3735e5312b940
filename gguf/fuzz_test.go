package gguf

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/ckpt-dev/ckpt/ggml"
)

// FuzzParse: Parse never panics, accepts only files whose tensors lie in
// the file without overlapping, and allocates within a bound set by the
// input's size and the limits, not by the counts the input claims.
func FuzzParse(f *testing.F) {
	f.Add(write(f, sampleKV(), sampleTensors()))
	f.Add(simple(binary.BigEndian, 3))
	f.Add(simple(binary.LittleEndian, 1))
	lim := Limits{MaxTensors: 1 << 12, MaxKV: 1 << 12, MaxStringLen: 1 << 16, MaxArrayLen: 1 << 16, MaxNesting: 4, MaxMetadataBytes: 8 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		pf, err := Parse(bytes.NewReader(data), int64(len(data)), WithLimits(lim))
		runtime.ReadMemStats(&ms)
		if used := ms.TotalAlloc - before; used > 64<<20+uint64(len(data))*64 {
			t.Fatalf("%d bytes of input allocated %d bytes", len(data), used)
		}
		if err != nil {
			return
		}
		for _, ti := range pf.Tensors {
			end := pf.DataOffset + int64(ti.Offset) + ti.Size
			if end > int64(len(data)) || ti.Size < 0 || !ti.Type.Known() || len(ti.Dims) > MaxDims {
				t.Fatalf("tensor %q accepted outside the file: %+v", ti.Name, ti)
			}
			if rb, err := ti.Type.RowBytes(ti.NumEl()); err != nil || rb != ti.Size && ti.Type.BlockSize() == 1 {
				t.Fatalf("tensor %q: size %d, row bytes %d %v", ti.Name, ti.Size, rb, err)
			}
		}
		_ = ggml.F32
	})
}
