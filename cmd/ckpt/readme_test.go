package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEInspectExample keeps the README's opening example equal to what
// ckpt prints.
func TestREADMEInspectExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const cmdLine = "$ ckpt inspect testdata/fixtures/cuda_tagged.pt\n"
	text := string(readme)
	i := strings.Index(text, cmdLine)
	j := strings.Index(text, "$ ckpt load ")
	if i < 0 || j < i {
		t.Fatal("README lost its inspect example")
	}
	want := text[i+len(cmdLine) : j]
	t.Chdir("../..")
	got, code, errs := cli("inspect", "testdata/fixtures/cuda_tagged.pt")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if trimLines(got) != trimLines(want) {
		t.Errorf("README example differs from the output:\n--- README\n%s\n--- ckpt\n%s", want, got)
	}
}

func trimLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
