package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInvalidSparseEveryCommand: a sparse tensor whose invariants do not
// hold (torch.load refuses the file) is refused by every command that reads
// data, with one line naming the file and the tensor, and nothing written;
// inspect, which reads metadata only, still lists it.
func TestInvalidSparseEveryCommand(t *testing.T) {
	cases, _ := filepath.Glob(fx + "bad/*sparse_invalid_*.pt")
	if len(cases) < 8 {
		t.Fatalf("found %d invalid sparse fixtures", len(cases))
	}
	for _, path := range cases {
		key := strings.TrimSuffix(filepath.Base(path), ".pt")
		t.Run(key, func(t *testing.T) {
			dir := t.TempDir()
			for _, args := range [][]string{
				{"load", path, "--map-location", "cpu"},
				{"verify", path},
				{"convert", path, filepath.Join(dir, "out.safetensors")},
				{"convert", path, filepath.Join(dir, "out.pth")},
			} {
				code, _, errs := runCLI(t, args...)
				if code != exitError || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, path) ||
					!strings.Contains(errs, "sparse tensor invariants do not hold") {
					t.Errorf("%s: exit %d, stderr %q: want exit 1 and one line naming the file and the invariant", args[0], code, errs)
				}
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("convert left %v behind", left)
			}
			if code, out, errs := runCLI(t, "inspect", path); code != exitOK || !strings.Contains(out, "indices") {
				t.Errorf("inspect: exit %d, %q %q", code, out, errs)
			}
		})
	}
}
