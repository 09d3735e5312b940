package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/hostile"
)

// TestHostileCLI runs the real binary on cases of the hostile corpus, as
// a child process: each fails with exit 1 and one line on stderr naming
// the file and the record, without Go syntax, within a bound on time and
// on the child's peak RSS (getrusage): 128 MiB plus 8 bytes per byte of
// the uncompressed input. The inputs are written by another process, so
// that this one stays small: a child's ru_maxrss starts from its parent's
// peak (the parent's memory is the child's until exec). For the same
// reason the test runs in a test process of its own, started afresh:
// the other tests of the package leave this one's peak wherever they took
// it.
func TestHostileCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if os.Getenv("CKPT_HOSTILE_FRESH") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHostileCLI$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "CKPT_HOSTILE_FRESH=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestHostileCLI")) {
			t.Fatalf("TestHostileCLI in a fresh process: %v\n%s", err, out)
		}
		return
	}
	dir := t.TempDir()
	bin := buildCLI(t)
	runs := map[string][][]string{
		"dag_list_30.pt":         {{"inspect"}},
		"dag_tensor_22.pt":       {{"inspect"}, {"convert", "--to", "safetensors"}, {"load", "--map-location", "cpu"}},
		"dag_dict_28.pt":         {{"verify"}},
		"long_names.pt":          {{"inspect", "--json"}},
		"long4_real_20m.pt":      {{"inspect"}},
		"deep_lists.pt":          {{"inspect"}},
		"dup_flood_100m.pt":      {{"inspect"}, {"convert", "--to", "safetensors"}},
		"memo_index_huge.pt":     {{"inspect"}},
		"binunicode8_claimed.pt": {{"inspect"}},
	}
	if out, err := exec.Command("go", "run", "github.com/ckpt-dev/ckpt/internal/hostile/gen", "-all", dir).CombinedOutput(); err != nil {
		t.Fatalf("go run gen: %v\n%s", err, out)
	}
	for _, c := range hostile.Cases() {
		cmds, ok := runs[c.Name]
		if !ok {
			continue
		}
		path := filepath.Join(dir, c.Name)
		in, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range cmds {
			argv := append([]string{args[0], path}, args[1:]...)
			if args[0] == "convert" {
				argv = append([]string{"convert", path, filepath.Join(dir, "out.safetensors")}, args[1:]...)
			}
			cmd := exec.Command(bin, argv...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			rss := peakRSS(cmd.ProcessState)
			msg := stderr.String()
			t.Logf("%s %s: exit %d, %v, peak RSS %.1f MB: %s", args[0], c.Name, cmd.ProcessState.ExitCode(), took.Round(time.Millisecond), float64(rss)/1e6, strings.TrimSpace(msg))
			if _, ok := err.(*exec.ExitError); !ok || cmd.ProcessState.ExitCode() != 1 {
				t.Errorf("%s %s: %v, want exit 1", args[0], c.Name, err)
			}
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, path) || !strings.Contains(msg, "record") ||
				!strings.Contains(msg, c.Want) {
				t.Errorf("%s %s: stderr %q: want one line naming the file and record and containing %q", args[0], c.Name, msg, c.Want)
			}
			for _, bad := range []string{"&{", "map[", "0xc0", "*pickle.", "*statedict.", "goroutine "} {
				if strings.Contains(msg, bad) {
					t.Errorf("%s %s: Go syntax %q in %q", args[0], c.Name, bad, msg)
				}
			}
			if bound := int64(128<<20) + 8*hostile.Unpacked(in); rss > bound {
				t.Errorf("%s %s: peak RSS %d, bound %d", args[0], c.Name, rss, bound)
			}
			if limit := 10*time.Second + time.Duration(hostile.Unpacked(in)>>20)*time.Second; took > limit {
				t.Errorf("%s %s: took %v, bound %v", args[0], c.Name, took, limit)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out.safetensors")); err == nil {
		t.Errorf("convert left an output behind")
	}
}

// A shared tree can name one tensor from 2^14 paths; inspect --stats and
// verify A B work once per view (and still report every name). Before,
// both read the 16 MiB storage once per name: 256 GiB.
func TestTiedViewsOnce(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pt"), filepath.Join(dir, "b.pt")
	if err := os.WriteFile(a, hostile.TiedDAG(14, 4<<20, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, hostile.TiedDAG(14, 4<<20, 0x3f), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, out, errs := runCLI(t, "inspect", "--stats", "--json", a)
	if code != 0 || strings.Count(out, `"min": 0`) != 1<<14 {
		t.Fatalf("inspect --stats: exit %d, %d stats, %s", code, strings.Count(out, `"min": 0`), errs)
	}
	code, out, errs = runCLI(t, "verify", a, b, "--json")
	if code != 1 || strings.Count(out, `"kind": "value"`) != 1<<14 || !strings.Contains(out, `"name": "1.1.1.1.1.1.1.1.1.1.1.1.1.1"`) {
		t.Fatalf("verify: exit %d, %d value mismatches, %s", code, strings.Count(out, `"kind": "value"`), errs)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %v", took)
	}
}
