package scan

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/testenv"
	"github.com/ckpt-dev/ckpt/pickle"
)

// advisories holds ckpt's own hostile corpus, built by
// scripts/gen_scan_advisories.py: payloads for the private module aliases
// of the standard library and torch, and the 2025-26 advisories.
const advisories = "../testdata/scan-advisories"

// proof says how a payload's harm shows when CPython loads it.
type proof struct {
	Kind    string `json:"kind"`     // creates (./pwned), exit (status 77), returns (the result's repr), inconsistent (see runner), none (benign)
	Loader  string `json:"loader"`   // pickle (pickle.load), torch (torch.load, weights_only=False) or torch_weights_only (weights_only=True)
	Returns string `json:"returns"`  // for returns: text the repr holds
	Python  string `json:"python"`   // the major.minor the payload needs ("" any)
	Needs   string `json:"needs"`    // a module the payload's loader path imports (torch, numpy)
	Torch   string `json:"torch"`    // the torch version (prefix) whose sources the payload was listed from
	OS      string `json:"platform"` // "win32" for an alias defined only on Windows (not run here)
}

type advisoryEntry struct {
	corpusEntry
	Proof proof `json:"proof"`
}

func readManifest[T any](t *testing.T, path string) []T {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Files []T `json:"files"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m.Files
}

// runner loads the payload named by argv[1] as argv[2] says, in the
// working directory; what it prints and its exit status are the proof.
// Threads and commands a payload starts are given time to finish. A torch
// zip loaded with weights_only=True is compared with its records (one
// storage record, every tensor over it): INCONSISTENT when a tensor's
// storage is not the record's size, or its bytes are not the record's,
// and the load raised nothing (memory corruption: CVE-2026-24747). Bytes
// are compared only when the sizes match, so that nothing past the
// record's allocation is read.
const runner = `
import sys, time, pickle
path, loader = sys.argv[1], sys.argv[2]
res = None
try:
    if loader == "torch":
        import torch
        res = torch.load(path, weights_only=False)
    elif loader == "torch_weights_only":
        import torch, zipfile
        res = torch.load(path, weights_only=True)
        with zipfile.ZipFile(path) as z:
            [rec] = [z.read(n) for n in z.namelist() if "/data/" in n]
        for name, t in res.items():
            nbytes = t.untyped_storage().nbytes() if hasattr(t, "untyped_storage") else t.storage().size() * t.element_size()
            if nbytes != len(rec):
                print("INCONSISTENT tensor %s: storage of %d bytes over a record of %d" % (name, nbytes, len(rec)))
            elif t.contiguous().numpy().tobytes() != rec[:t.numel() * t.element_size()]:
                print("INCONSISTENT tensor %s: holds bytes its record does not: %r" % (name, t[:4].tolist()))
    else:
        with open(path, "rb") as f:
            res = pickle.load(f)
except Exception as e:
    print("RAISED", type(e).__name__, str(e)[:300])
print("RESULT", repr(res)[:2000])
sys.stdout.flush()
time.sleep(0.1)
`

// TestAdvisoriesRunInCPython proves every payload of the corpus does its
// harm in CPython (Python() of the interop tests: Debian's 3.11 with torch
// 1.13, or scripts/torch2-python's 3.13 with torch 2.6), each in an empty
// directory, its harm a marker there; and that the benign controls, run
// the same way, leave none. A payload whose interpreter version or module
// Python() lacks is skipped by name, unless CKPT_REQUIRE_INTEROP=all.
func TestAdvisoriesRunInCPython(t *testing.T) {
	testenv.Require(t, "pickle")
	py := testenv.Python()
	ver, err := exec.Command(py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(ver))
	has := map[string]bool{}
	for _, m := range []string{"torch", "numpy"} {
		has[m] = exec.Command(py, "-c", "import "+m).Run() == nil
	}
	torchVersion := ""
	if has["torch"] {
		v, _ := exec.Command(py, "-c", "import torch; print(torch.__version__)").Output()
		torchVersion = strings.TrimSpace(string(v))
	}
	var skipped []string
	ran := 0
	for _, e := range readManifest[advisoryEntry](t, filepath.Join(advisories, "manifest.json")) {
		p := e.Proof
		needs := p.Needs
		if strings.HasPrefix(p.Loader, "torch") {
			needs = "torch"
		}
		if p.Torch != "" {
			needs = "torch"
		}
		if p.OS != "" || p.Python != "" && p.Python != version || needs != "" && !has[needs] || !strings.HasPrefix(torchVersion, p.Torch) {
			skipped = append(skipped, e.File)
			continue
		}
		ran++
		t.Run(e.File, func(t *testing.T) {
			t.Parallel()
			provePayload(t, py, version, e)
		})
	}
	t.Logf("%d payloads run in %s %s; skipped (another Python or torch, or no torch/numpy): %s", ran, py, version, strings.Join(skipped, ", "))
	if os.Getenv("CKPT_REQUIRE_INTEROP") == "all" && ran == 0 {
		t.Errorf("CKPT_REQUIRE_INTEROP=all but no payload ran")
	}
}

// provePayload runs one payload in an empty directory and checks its harm.
func provePayload(t *testing.T, py, version string, e advisoryEntry) {
	p := e.Proof
	dir := t.TempDir()
	payload := filepath.Join(dir, filepath.Base(e.File))
	data, err := os.ReadFile(filepath.Join(advisories, e.File))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{payload: string(data), filepath.Join(dir, "secret.txt"): "s3cret\n",
		filepath.Join(dir, "pwnmod.py"): "open('pwned', 'w').close()\nclass Warning(Warning): pass\n"}
	for name, body := range files {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cmd := exec.CommandContext(ctx, py, "-c", runner, filepath.Base(payload), p.Loader)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir, "PWD=" + dir, "LC_ALL=C.UTF-8"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	cancel()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", e.File, err)
	}
	marker := filepath.Join(dir, "pwned")
	created := waitFor(marker, p.Kind == "creates")
	var bad string
	switch p.Kind {
	case "creates":
		if !created {
			bad = "created no ./pwned"
		}
	case "exit":
		if code != 77 {
			bad = "did not exit 77"
		}
	case "returns":
		if !strings.Contains(out.String(), "RESULT") || !strings.Contains(out.String()[strings.Index(out.String(), "RESULT"):], p.Returns) {
			bad = "returned nothing naming " + p.Returns
		}
	case "inconsistent":
		if !strings.Contains(out.String(), "INCONSISTENT") || strings.Contains(out.String(), "RAISED") {
			bad = "loaded nothing inconsistent with its records, or raised"
		}
	case "none":
		if created || code != 0 || strings.Contains(out.String(), "RAISED") || strings.Contains(out.String(), "INCONSISTENT") {
			bad = "a benign control left a marker, failed, raised or loaded something inconsistent"
		}
	default:
		t.Fatalf("%s: proof kind %q", e.File, p.Kind)
	}
	if bad != "" {
		t.Errorf("%s (%s) %s in %s %s: exit %d\n%s", e.File, e.Does, bad, py, version, code, out.String())
	}
}

// waitFor reports whether path exists, waiting up to 5 s for a command a
// payload started in the background when it is expected.
func waitFor(path string, expected bool) bool {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		if !expected || time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAliasesFromSources: every private alias the standard library and
// torch define at module level (aliases.json, listed from their sources by
// scripts/gen_scan_advisories.py) of an unsafe module or function is
// unsafe reached through the module that defines it: the alias itself and,
// for a module, any attribute of it.
func TestAliasesFromSources(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(advisories, "aliases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Aliases [][6]string `json:"aliases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Aliases) < 100 {
		t.Fatalf("aliases.json lists %d aliases, want the standard library's (about 150)", len(doc.Aliases))
	}
	checked := 0
	for _, a := range doc.Aliases {
		src, mod, alias, target := a[0], a[1], a[2], a[3]
		i := strings.LastIndexByte(target, '.')
		// The target judged on its own: a module ("import X as _Y") by
		// a neutral attribute of it, "from M import N as _Y" as M.N.
		isModule := a[4] == "import"
		var tv pickle.Verdict
		if isModule {
			tv, _ = pickle.Classify(target, "x")
		} else {
			tv, _ = pickle.Classify(target[:i], target[i+1:])
		}
		if tv != pickle.VerdictUnsafe {
			continue
		}
		checked++
		names := []string{alias}
		if isModule {
			names = append(names, alias+".x")
		}
		for _, n := range names {
			if v, why := pickle.Classify(mod, n); v != pickle.VerdictUnsafe {
				t.Errorf("%s: %s.%s (%s is %s) is %s: %s", src, mod, n, alias, target, v, why)
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d aliases of unsafe targets checked", checked)
	}
}
