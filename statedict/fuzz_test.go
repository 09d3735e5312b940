package statedict_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// FuzzNewReader feeds every container reader (zip, legacy, tar,
// safetensors, gzip/zstd) with mutations of the real fixtures: whatever the
// input, NewReader and reading every tensor must return, not panic or hang.
func FuzzNewReader(f *testing.F) {
	// bad/deep_nesting.pt is left out: 100,000 nested lists make every
	// mutation slow under coverage instrumentation; TestBadFixtures covers it.
	for _, pat := range []string{"*.pt", "*.pth", "*.bin", "*.safetensors", "*.gz", "bad/*"} {
		m, _ := filepath.Glob(filepath.Join(fixtures, pat))
		for _, p := range m {
			if filepath.Base(p) == "deep_nesting.pt" {
				continue
			}
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				f.Add(b)
			}
		}
	}
	// The hostile corpus (see internal/hostile).
	m, _ := filepath.Glob(filepath.Join("..", "testdata", "hostile", "*"))
	for _, p := range m {
		if filepath.Base(p) == "expect.tsv" {
			continue
		}
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ck, err := statedict.NewReader(bytes.NewReader(data), int64(len(data)), statedict.WithTempDir(t.TempDir()),
			statedict.WithMaxDecompressedSize(8<<20))
		if err != nil {
			return
		}
		defer ck.Close()
		for _, tt := range ck.Tensors {
			if tt.NBytes() > 1<<20 {
				continue
			}
			_, _ = tt.ReadAll()
		}
	})
}
