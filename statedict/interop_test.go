package statedict_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/statedict"
)

// requireTorch skips without torch and numpy, or fails when
// CKPT_REQUIRE_INTEROP=1 says interop must run (as in CI).
func requireTorch(t *testing.T) {
	t.Helper()
	testenv.Require(t, "torch", "numpy")
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
	out, err := exec.Command(testenv.Python(), append([]string{"testdata/dump_tensors.py"}, srcs...)...).Output()
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

// TestInteropFreshSave: checkpoints saved by the torch under test
// (whichever testenv.Python runs: 1.13 in CI's first pass, 2.x in its
// second), holding every dtype that torch has, views, shared storages and
// nested containers, in the zip and legacy formats, read by ckpt with
// torch's names, dtypes, shapes and bytes.
func TestInteropFreshSave(t *testing.T) {
	requireTorch(t)
	dir := t.TempDir()
	cmd := exec.Command(testenv.Python(), "testdata/fresh_save.py", dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("fresh_save.py: %v\n%s", err, stderr.String())
	}
	var res struct {
		Torch string
		Files map[string]map[string]struct {
			DType string
			Shape []int64
			Hex   string
		}
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("torch %s", res.Torch)
	for path, want := range res.Files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ck, err := statedict.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if len(ck.Tensors) != len(want) {
				t.Errorf("%d tensors, torch %d", len(ck.Tensors), len(want))
			}
			for name, w := range want {
				tt := ck.Tensor(name)
				if tt == nil {
					t.Errorf("tensor %q: torch has it, ckpt does not", name)
					continue
				}
				if tt.DType.String() != w.DType || fmt.Sprint(tt.Shape) != fmt.Sprint(w.Shape) {
					t.Errorf("%s: %s%v, torch %s%v", name, tt.DType, tt.Shape, w.DType, w.Shape)
					continue
				}
				b, err := tt.ReadAll()
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				if got := hex.EncodeToString(b); got != w.Hex {
					t.Errorf("%s: bytes %s, torch %s", name, got, w.Hex)
				}
			}
		})
	}
}
