package torchzip

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/pickle"
)

// FuzzEncodeTree unpickles arbitrary bytes (storages refused) and writes
// the tree back: no panic, and what EncodeTree writes unpickles to a tree
// that EncodeTree writes to the same bytes again.
func FuzzEncodeTree(f *testing.F) {
	pkl, err := EncodeTree(sampleTree())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pkl)
	seeds, _ := filepath.Glob("../pickle/testdata/*.pkl")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	lim := pickle.WithLimits(pickle.Limits{MaxDepth: 200, MaxMemo: 1 << 16, MaxContainerLen: 1 << 16, MaxOps: 1 << 20})
	noStorage := pickle.WithPersistentLoad(func(any) (any, error) { return nil, errors.New("no storages here") })
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := pickle.Unpickle(b, lim, noStorage)
		if err != nil {
			return
		}
		out, err := EncodeTree(v)
		if err != nil {
			return
		}
		if len(out) > 64*len(b)+64 { // a node costs at most a few dozen bytes
			t.Fatalf("%d input bytes gave a %d-byte pickle", len(b), len(out))
		}
		v2, err := pickle.Unpickle(out, lim, noStorage)
		if err != nil {
			t.Fatalf("output does not unpickle: %v", err)
		}
		again, err := EncodeTree(v2)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("second round differs: %v", err)
		}
	})
}
