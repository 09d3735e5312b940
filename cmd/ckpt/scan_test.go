package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestScanEscapesControlCharacters: record names come from the file; an
// ESC sequence or a carriage return in one must not reach the terminal raw
// (issue 20 item 6), in the findings table or in the problems list.
func TestScanEscapesControlCharacters(t *testing.T) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for name, data := range map[string]string{
		"archive/evil\x1b[2J\rOK.pkl":  "\x80\x02cos\nsystem\nX\x04\x00\x00\x00true\x85R.",
		"archive/broken\x1b]0;t\a.pkl": "\x80\x02(",
	} {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Store})
		w.Write([]byte(data))
	}
	zw.Close()
	p := filepath.Join(t.TempDir(), "esc.pt")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "scan", p)
	if code != exitError || strings.ContainsAny(out+errs, "\x1b\r\a") ||
		!strings.Contains(out, `evil\x1b[2J\rOK.pkl`) || !strings.Contains(out, `broken\x1b]0;t\a.pkl`) {
		t.Errorf("exit %d, raw control characters or names missing:\n%q\n%q", code, out, errs)
	}
}

// TestScanFIFO: a FIFO on the command line is refused at once, in one
// line, exit 1, as inspect refuses it (a scan blocked in open, deaf to
// SIGTERM, before).
func TestScanFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pipe.pt")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	code, out, errs := runCLI(t, "scan", p)
	if code != exitError || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "FIFO") {
		t.Errorf("exit %d: %q %q", code, out, errs)
	}
}
