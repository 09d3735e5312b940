package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/cuda"
	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// bench/gpu_proof.sh's fixture check (gpu_proof.py fixture), run on the
// fake driver's upload: the fixtures holding storage values pass, every
// storage counted once, as the H200 run could not (storage_root.pt: "0
// storages, not verified").
func TestGPUProofFixtureCheckStorageValues(t *testing.T) {
	testenv.Require(t, "json")
	env := fakeCUDA(t)
	dir := t.TempDir()
	want := map[string]string{
		"storage_root.pt":     "storage_root.pt: PASS: 1 storages, 8 bytes on cuda:0",
		"storages.pt":         "storages.pt: PASS: 4 storages, 35 bytes on cuda:0",
		"storages_legacy.pt":  "storages_legacy.pt: PASS: 3 storages, 30 bytes on cuda:0",
		"old_storage_view.pt": "old_storage_view.pt: PASS: 2 storages, 36 bytes on cuda:0", // the view is on_view's storage too,
	}
	for name, line := range want {
		f := filepath.Join("..", "..", "testdata", "fixtures", name)
		var paths []string
		for i, e := range []map[string]string{nil, env} {
			args := []string{f, "--map-location", "cpu", "--json"}
			if i == 1 {
				args[2] = "cuda:0"
			}
			out, code, errs := loadExec(t, cuda.System{}, e, args...)
			if code != exitOK {
				t.Fatalf("%s %v: exit %d: %s", name, args, code, errs)
			}
			p := filepath.Join(dir, name+[]string{".cpu.json", ".cuda.json"}[i])
			if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		got, err := exec.Command(testenv.Python(), filepath.Join("..", "..", "bench", "gpu_proof.py"), "fixture", name, paths[0], paths[1]).CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != line {
			t.Errorf("%s: %q (%v), want %q", name, got, err, line)
		}
	}
}
