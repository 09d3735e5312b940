package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestScanExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"scan", fx + "zip_basic.pt"}, 0, "Verdict:  allowed"},
		{[]string{"scan", fx + "training.pt"}, 0, "numpy"},
		{[]string{"scan", fx + "foreign.pt"}, 3, "mymodule.MyConfig"},
		{[]string{"scan", fx + "foreign.pt", fx + "bad/unsafe_os_system.pt"}, 1, "os.system"},
		{[]string{"scan", fx + "bad/garbage.pt"}, 3, "Not scanned in full"},
		{[]string{"scan"}, 2, ""},
		{[]string{"scan", fx + "no_such_file.pt"}, 1, ""},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("ckpt %s: exit %d (want %d), output lacks %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, errs)
		}
	}
}

func TestScanJSON(t *testing.T) {
	code, out, errs := runCLI(t, "scan", "--json", fx+"bad/unsafe_stack_global.pt")
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Verdict  string
		Files    int
		Findings []struct {
			File, Record, Op, Global, Verdict string
			Offset                            int64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	found := false
	for _, f := range rep.Findings {
		if f.Global == "builtins.exec" && f.Verdict == "unsafe" && f.Op == "STACK_GLOBAL" && f.Offset > 0 &&
			f.Record == "unsafe_stack_global/data.pkl" {
			found = true
		}
	}
	if rep.Verdict != "unsafe" || rep.Files != 1 || !found {
		t.Errorf("report %+v", rep)
	}
}

// TestConvertDroppedRootName: convert names the root "(root)" in its
// dropped list, as inspect does (a whole pickled model's class).
func TestConvertDroppedRootName(t *testing.T) {
	out := t.TempDir() + "/m.safetensors"
	code, stdout, errs := runCLI(t, "convert", fx+"module_zip.pt", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout+errs, "  (root)  mymodule.Net") {
		t.Errorf("dropped list does not name the root (root):\n%s%s", stdout, errs)
	}
	code, stdout, _ = runCLI(t, "inspect", fx+"module_zip.pt")
	if code != 0 || !strings.Contains(stdout, "conv1.weight") || strings.Contains(stdout, "_modules") ||
		!strings.Contains(stdout, "(root)  mymodule.Net") {
		t.Errorf("inspect of a whole model:\n%s", stdout)
	}
}
