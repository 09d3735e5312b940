package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzClean: whatever a file holds, clean's output is valid UTF-8 with no
// rune that changes a terminal's state, and text without such runes passes
// through unchanged.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"layer.0.weight", "evil\x1b[2J", "a\nb\tc", "\u202eabc", "\xff\xfe", "\x9b", "é ü 中", `back\slash`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := clean(s)
		if !utf8.ValidString(out) {
			t.Fatalf("clean(%q) = %q is not UTF-8", s, out)
		}
		for _, r := range out {
			if unsafeRune(r) {
				t.Fatalf("clean(%q) = %q keeps %U", s, out, r)
			}
		}
		if !needsClean(s) && out != s {
			t.Fatalf("clean changed safe text %q to %q", s, out)
		}
		if needsClean(s) && !strings.Contains(out, `\`) {
			t.Fatalf("clean(%q) = %q escapes nothing", s, out)
		}
	})
}
