package statedict_test

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// requireTorch skips when /usr/bin/python3 cannot import torch, or fails
// when CKPT_REQUIRE_INTEROP=1 says interop must run (as in CI).
func requireTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import torch, numpy").Run(); err != nil {
		if os.Getenv("CKPT_REQUIRE_INTEROP") == "1" {
			t.Fatalf("torch not available but CKPT_REQUIRE_INTEROP=1: %v", err)
		}
		t.Skip("torch not available, skipping")
	}
}

// TestInteropLogicalBytes checks that Tensor.Open returns, for every dense
// tensor of every fixture torch can load, exactly the bytes torch holds
// after .contiguous(): offsets, strides, views and dtypes all honoured.
func TestInteropLogicalBytes(t *testing.T) {
	requireTorch(t)
	files := []string{"zip_basic.pt", "zip_archive.pt", "zip_v21.pt", "zip_deflated.pt", "zip64.pt", "legacy.pt", "tar.pt",
		"dtypes_classic.pt", "tied.pt", "params.pt", "training.pt", "cuda_tagged.pt", "cuda_training.pt", "root_tensor.pt",
		"zip_basic.pt.gz"}
	var srcs []string
	for _, name := range files {
		srcs = append(srcs, torchSource(filepath.Join(fixtures, name)))
	}
	out, err := exec.Command("/usr/bin/python3", append([]string{"testdata/dump_tensors.py"}, srcs...)...).Output()
	if err != nil {
		t.Fatalf("torch: %v", err)
	}
	var dumps map[string]map[string]string
	if err := json.Unmarshal(out, &dumps); err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(fixtures, name)
			want := dumps[torchSource(path)]
			if len(want) == 0 {
				t.Fatal("torch reported no tensors")
			}
			ck, err := statedict.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			for n, hx := range want {
				tt := ck.Tensor(n)
				if tt == nil {
					t.Errorf("tensor %q: torch has it, ckpt does not", n)
					continue
				}
				b, err := tt.ReadAll()
				if err != nil {
					t.Errorf("%s: %v", n, err)
					continue
				}
				if got := hex.EncodeToString(b); got != hx {
					t.Errorf("%s: bytes %s, torch %s", n, got, hx)
				}
			}
		})
	}
}

// torchSource is the file torch reads for a fixture: the original of a
// gzip-wrapped copy, the fixture itself otherwise.
func torchSource(path string) string {
	return strings.TrimSuffix(path, ".gz")
}
