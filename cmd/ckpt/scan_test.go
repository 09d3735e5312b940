package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScanExitCodes: one rule (scan --help, README, docs/cli-json.md):
// an unsafe global or anything not scanned in full exits 1, unknown
// globals in files read in full exit 3, the rest 0. An unreadable file
// or record never exits 3 ("nothing unsafe", issue 34 item 2), alone or
// beside a file with unknown globals.
func TestScanExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A GGUF whose header says 2^40 tensors in a 40-byte file.
	badGGUF := write("bad.gguf", append([]byte("GGUF\x03\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"), make([]byte, 16)...))
	truncated := write("truncated.pkl", []byte("\x80\x02cmymodule\nMyConfig\n)\x81}(X"))
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "archive/data.pkl", Method: zip.Store})
	w.Write([]byte("\x80\x02}q\x00(X"))
	zw.Close()
	badRecord := write("bad_record.pt", b.Bytes())
	readme := write("README.md", []byte("# a model card\n"))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"scan", fx + "zip_basic.pt"}, 0, "Verdict:  allowed"},
		{[]string{"scan", fx + "training.pt"}, 0, "numpy"},
		{[]string{"scan", fx + "tiny.gguf"}, 0, "Verdict:  allowed"},
		{[]string{"scan", fx + "foreign.pt"}, 3, "mymodule.MyConfig"},
		{[]string{"scan", fx + "foreign.pt", fx + "bad/unsafe_os_system.pt"}, 1, "os.system"},
		{[]string{"scan", fx + "bad/garbage.pt"}, 1, "Not scanned in full"},
		{[]string{"scan", badGGUF}, 1, "bad.gguf"},
		{[]string{"scan", truncated}, 1, "mymodule.MyConfig"},
		{[]string{"scan", badRecord}, 1, "archive/data.pkl"},
		{[]string{"scan", readme}, 1, "malformed pickle"},
		{[]string{"scan", fx + "foreign.pt", badGGUF}, 1, "mymodule.MyConfig"},
		{[]string{"scan", dir}, 1, "bad_record.pt"},
		{[]string{"scan"}, 2, ""},
		{[]string{"scan", fx + "no_such_file.pt"}, 1, ""},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("ckpt %s: exit %d (want %d), output lacks %q:\n%s%s", strings.Join(c.args, " "), code, c.code, c.want, out, errs)
		}
		if code == 1 && strings.Contains(errs, "nothing unsafe") || code == exitUnknown && !strings.Contains(errs, "nothing unsafe") {
			t.Errorf("ckpt %s: exit %d says %q", strings.Join(c.args, " "), code, errs)
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
