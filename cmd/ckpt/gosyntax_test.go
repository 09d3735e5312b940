package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goSyntax matches what Go's fmt prints for values that have no Python
// spelling: pointers to structs (&{...}), maps, heap addresses, slice
// types, %#v struct dumps, package-qualified types, fmt's error verbs.
var goSyntax = regexp.MustCompile(`&\{|map\[|0x[0-9a-f]{8,}|\[\][a-z*]|\b[a-z]+\.[A-Z][A-Za-z]*\{|\*[a-z]+\.[A-Z]|%!|<nil>|interface \{\}`)

// TestNoGoSyntax runs inspect (text, --json and --stats), convert (to
// safetensors, text and --json, and to .pt: its lists of dropped values)
// and verify on every fixture, good and bad, and fails on Go syntax
// anywhere in the output or the error message.
func TestNoGoSyntax(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "fixtures")
	var paths []string
	for _, sub := range []string{dir, filepath.Join(dir, "bad")} {
		m, err := filepath.Glob(filepath.Join(sub, "*.expected.json"))
		if err != nil || len(m) == 0 {
			t.Fatalf("no fixtures in %s", sub)
		}
		for _, e := range m {
			paths = append(paths, strings.TrimSuffix(e, ".expected.json"))
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		for _, args := range [][]string{{"inspect", p}, {"inspect", "--json", p}, {"inspect", "--stats", p},
			{"convert", p, filepath.Join(out, "a.safetensors")}, {"convert", "--json", p, filepath.Join(out, "b.safetensors")},
			{"convert", p, filepath.Join(out, "c.pt")}, {"verify", p}} {
			_, out, errs := runCLI(t, args...)
			for what, s := range map[string]string{"output": out, "error": errs} {
				if m := goSyntax.FindString(s); m != "" {
					t.Errorf("ckpt %s: %s has Go syntax %q:\n%s", strings.Join(args, " "), what, m, s)
				}
			}
		}
	}
}
