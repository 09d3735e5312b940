package main

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/ckpt-dev/ckpt/internal/human"
	"strings"
	"testing"
)

const fx = "../../testdata/fixtures/"

// runCLI runs the command line in-process and returns exit code, stdout, stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func TestInspectHuman(t *testing.T) {
	code, out, errs := runCLI(t, "inspect", fx+"cuda_tagged.pt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"Format:    torch-zip", "cuda:0", "cuda:1", "STRAY", "Stray tensors"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectJSON(t *testing.T) {
	code, out, errs := runCLI(t, "inspect", "--json", "--stats", fx+"training.pt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Format != "torch-zip" || rep.ByteOrder != "little" || len(rep.Tensors) == 0 {
		t.Fatalf("report %+v", rep)
	}
	var sawStats, sawEpoch bool
	for _, tt := range rep.Tensors {
		if tt.Stats != nil {
			sawStats = true
		}
	}
	for _, o := range rep.Objects {
		if o.Name == "epoch" && o.Value == float64(7) {
			sawEpoch = true
		}
	}
	if !sawStats || !sawEpoch {
		t.Errorf("stats %v epoch %v", sawStats, sawEpoch)
	}
	if len(rep.Opaque) == 0 {
		t.Errorf("argparse/numpy values not listed as opaque")
	}
}

func TestInspectFilter(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", "--json", "--filter", "optimizer.*", fx+"training.pt")
	if code != 0 {
		t.Fatal(code)
	}
	var rep inspectReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Tensors) == 0 {
		t.Fatal("filter kept nothing")
	}
	for _, tt := range rep.Tensors {
		if !strings.HasPrefix(tt.Name, "optimizer.") {
			t.Errorf("filter kept %s", tt.Name)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"inspect"}, exitUsage, "accepts 1 arg"},
		{[]string{"inspect", "--nope", "x"}, exitUsage, "unknown flag"},
		{[]string{"inspect", "--filter", "[", fx + "tied.pt"}, exitUsage, "--filter"},
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"inspect", fx + "bad/unsafe_os_system.pt"}, exitError, "os.system"},
		{[]string{"inspect", fx + "bad/legacy_empty.pt"}, exitError, "empty"},
		{[]string{"inspect", fx + "does-not-exist.pt"}, exitError, "no such file"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errs)
		}
		if !strings.Contains(errs, c.msg) {
			t.Errorf("%v: stderr %q lacks %q", c.args, errs, c.msg)
		}
		if strings.Contains(errs, "goroutine ") || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
			t.Errorf("%v: stderr is not one clear line: %q", c.args, errs)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 10 << 20: "10.0 MiB", 3 << 30: "3.00 GiB"} {
		if got := human.Bytes(n); got != want {
			t.Errorf("human.Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	if got := humanCount(1234567); got != "1,234,567" {
		t.Errorf("humanCount = %q", got)
	}
}
