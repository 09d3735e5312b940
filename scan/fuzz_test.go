package scan

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReader checks that scanning any content never panics or fails as a
// whole: what cannot be read is a Problem.
func FuzzReader(f *testing.F) {
	for _, name := range []string{"zip_basic.pt", "legacy.pt", "tar.pt", "zip_basic.pt.gz", "bad/unsafe_stack_global.pt"} {
		if b, err := os.ReadFile(filepath.Join(fixtures, name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(osSystem))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Reader(context.Background(), bytes.NewReader(data), int64(len(data)), "fuzz",
			WithMaxPickleSize(1<<20), WithMaxDecompressedSize(1<<22), WithTempDir(t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		_ = rep.Worst()
	})
}
