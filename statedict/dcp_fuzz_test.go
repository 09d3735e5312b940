package statedict

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ckpt-dev/ckpt/dcp"
)

// FuzzDCPCheckpoint feeds mutations of a real DCP .metadata (seeds: the
// fixture's and the damaged ones under testdata/dcp/bad) to the DCP reader over the fixture's
// .distcp files: parsing, tiling validation, chunk opening and assembly
// must return, not panic or hang, and a tensor that reads must have the
// size its metadata says.
func FuzzDCPCheckpoint(f *testing.F) {
	dir := filepath.Join(dcpFixtures, "basic")
	seed, err := os.ReadFile(filepath.Join(dir, dcp.MetadataFile))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	bad, _ := filepath.Glob(filepath.Join(dcpFixtures, "bad", "*.metadata"))
	for _, p := range bad {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(seed[:len(seed)/2])
	f.Add([]byte{0x80, 0x04, 0x4e, 0x2e}) // None
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := defaultConfig()
		cfg.limits.MaxOps = 1 << 20
		ck, err := openDCPMetadata(dir, data, &cfg)
		if err != nil {
			return
		}
		defer ck.Close()
		for _, tn := range ck.Tensors {
			if tn.NBytes() > 1<<20 {
				continue
			}
			b, err := tn.ReadAll()
			if err == nil && int64(len(b)) != tn.NBytes() {
				t.Fatalf("%s: %d bytes, want %d", tn.Name, len(b), tn.NBytes())
			}
			if err == nil && tn.Problem() != nil {
				t.Fatalf("%s read despite problem %v", tn.Name, tn.Problem())
			}
		}
	})
}
