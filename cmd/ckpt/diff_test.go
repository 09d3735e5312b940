package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/testenv"
)

// torchStats is what testdata/diff_pair.py computes in torch for a tensor.
type torchStats struct {
	BitwiseEqual bool             `json:"bitwise_equal"`
	Differing    int64            `json:"differing"`
	NaNMismatch  int64            `json:"nan_mismatch"`
	InfMismatch  int64            `json:"inf_mismatch"`
	MaxAbs       *float64         `json:"max_abs"`
	MaxRel       *float64         `json:"max_rel"` // null: infinite
	RMSE         *float64         `json:"rmse"`
	Cosine       *float64         `json:"cosine"`
	RelFrobenius *float64         `json:"rel_frobenius"`
	HistZero     int64            `json:"hist_zero"`
	HistNeg      map[string]int64 `json:"hist_neg"`
	HistPos      map[string]int64 `json:"hist_pos"`
}

// diffJSON is the part of `ckpt diff --json` the tests read.
type diffJSON struct {
	OK      bool     `json:"ok"`
	Notes   []string `json:"notes"`
	OnlyInA []string `json:"only_in_a"`
	OnlyInB []string `json:"only_in_b"`
	Failed  int      `json:"failed"`
	Tensors []struct {
		Name    string `json:"name"`
		NameA   string `json:"name_a"`
		Via     string `json:"via"`
		DTypeA  string `json:"dtype_a"`
		DTypeB  string `json:"dtype_b"`
		Problem string `json:"problem"`
		Failed  []string
		torchStats
		Histogram *struct {
			Lo   int     `json:"lo"`
			Zero int64   `json:"zero"`
			Neg  []int64 `json:"neg"`
			Pos  []int64 `json:"pos"`
		} `json:"histogram"`
	} `json:"tensors"`
}

func runDiffJSON(t *testing.T, args ...string) (int, diffJSON) {
	t.Helper()
	code, out, errs := runCLI(t, append([]string{"diff", "--json"}, args...)...)
	var rep diffJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("diff %v: exit %d, %v\n%s\n%s", args, code, err, out, errs)
	}
	return code, rep
}

func closeTo(got, want *float64) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return math.Abs(*got-*want) <= 1e-9*math.Max(1, math.Abs(*want))
}

// TestDiffInterop: torch writes a pair of checkpoints with known
// differences (a changed, a cast, a zeroed, a NaN/Inf and an integer
// tensor, a reshaped one, one only on each side) and computes each
// statistic in float64; `ckpt diff --json` of A against B as a legacy
// .pt, as safetensors, as shards ckpt convert cuts from it, and (torch
// 2.x) as a DCP directory gives the same numbers, and the same histogram
// bins as torch.frexp.
func TestDiffInterop(t *testing.T) {
	testenv.Require(t, "torch", "numpy")
	dir := t.TempDir()
	// The script runs from the temporary directory (scripts/torch2-python
	// runs in a chroot that sees /tmp).
	script, err := os.ReadFile("testdata/diff_pair.py")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "diff_pair.py"), script, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Python(), "diff_pair.py", ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("diff_pair.py: %v\n%s", err, out)
	}
	var want struct {
		Tensors map[string]torchStats `json:"tensors"`
		Torch   string                `json:"torch"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil || json.Unmarshal(b, &want) != nil || len(want.Tensors) != 7 {
		t.Fatalf("expected.json: %v %s", err, b)
	}
	if err := os.Mkdir(filepath.Join(dir, "shards"), 0o755); err != nil {
		t.Fatal(err)
	}
	shards := filepath.Join(dir, "shards", "model.safetensors")
	if code, out, errs := runCLI(t, "convert", filepath.Join(dir, "b.safetensors"), shards, "--max-shard-size", "2KB"); code != exitOK {
		t.Fatalf("convert to shards: %d %s %s", code, out, errs)
	}
	bs := []string{"b.pt", "b.safetensors", "shards"}
	if _, err := os.Stat(filepath.Join(dir, "b_dcp")); err == nil {
		bs = append(bs, "b_dcp")
	}
	t.Logf("torch %s, B as %v", want.Torch, bs)
	for _, bn := range bs {
		code, rep := runDiffJSON(t, filepath.Join(dir, "a.pt"), filepath.Join(dir, bn))
		if code != exitOK || !rep.OK {
			t.Errorf("%s: exit %d without limits", bn, code)
		}
		if !slices.Equal(rep.OnlyInA, []string{"only_a"}) || !slices.Equal(rep.OnlyInB, []string{"only_b"}) {
			t.Errorf("%s: only in A %v, only in B %v", bn, rep.OnlyInA, rep.OnlyInB)
		}
		seen := 0
		for _, td := range rep.Tensors {
			w, ok := want.Tensors[td.Name]
			if !ok {
				if td.Name != "model.reshaped" || !strings.Contains(td.Problem, "shape") {
					t.Errorf("%s: %s: problem %q", bn, td.Name, td.Problem)
				}
				continue
			}
			seen++
			g := td.torchStats
			if g.BitwiseEqual != w.BitwiseEqual || g.Differing != w.Differing || g.NaNMismatch != w.NaNMismatch || g.InfMismatch != w.InfMismatch ||
				!closeTo(g.MaxAbs, w.MaxAbs) || !closeTo(g.MaxRel, w.MaxRel) || !closeTo(g.RMSE, w.RMSE) ||
				!closeTo(g.Cosine, w.Cosine) || !closeTo(g.RelFrobenius, w.RelFrobenius) {
				t.Errorf("%s: %s:\n got %s\nwant %s", bn, td.Name, show(g), show(w))
			}
			h := td.Histogram
			if h == nil || h.Zero != w.HistZero || !sameBins(h.Lo, h.Neg, w.HistNeg) || !sameBins(h.Lo, h.Pos, w.HistPos) {
				t.Errorf("%s: %s: histogram %+v, torch zero %d neg %v pos %v", bn, td.Name, h, w.HistZero, w.HistNeg, w.HistPos)
			}
		}
		if seen != len(want.Tensors) {
			t.Errorf("%s: %d of %d tensors compared", bn, seen, len(want.Tensors))
		}
	}
}

func show(s torchStats) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sameBins compares a histogram's bins (bin i: exponent lo+i) with torch's
// counts by exponent.
func sameBins(lo int, bins []int64, want map[string]int64) bool {
	got := map[string]int64{}
	for i, n := range bins {
		if n != 0 {
			got[strconv.Itoa(lo+i)] = n
		}
	}
	if len(got) != len(want) {
		return false
	}
	for k, n := range want {
		if got[k] != n {
			return false
		}
	}
	return true
}
