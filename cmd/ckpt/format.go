package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// humanCount renders an integer with thousands separators: 1,234,567.
func humanCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// shapeString renders a shape the way torch prints torch.Size: [2, 3].
func shapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, s := range shape {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// clean makes file-derived text safe to print on a terminal: control
// characters (C0 including tab and newline, DEL, C1), Unicode line and
// paragraph separators and bidirectional overrides, and invalid UTF-8 are
// written as Go escapes (\x1b, \n, \u202e), so that a tensor name holding an
// ESC sequence cannot move the cursor or clear the screen, and a name with a
// newline cannot forge a line of the report. Backslashes are left alone:
// text without such characters prints unchanged. JSON output needs none of
// this (encoding/json escapes control characters).
func clean(s string) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsClean(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || unsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// unsafeRune reports a rune that changes a terminal's state or the layout
// of the text around it.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// displayName is how every command prints a tensor or value name in text:
// the root of the checkpoint (an empty path) as "(root)", anything else
// through clean.
func displayName(name string) string {
	if name == "" {
		return "(root)"
	}
	return clean(name)
}

// strayHeading states the rule remap.DetectStrays applies, so the reader
// knows why these tensors are listed and the others are not. home is the
// checkpoint's home device (the strays' Dominant).
func strayHeading(home string) string {
	if home == "cpu" {
		return "Stray tensors (home: cpu, which holds the most bytes; a stray is any tensor saved on another device):"
	}
	return fmt.Sprintf("Stray tensors (home: %s, which holds the most bytes; a stray is a CPU tensor, or a tensor on another\n"+
		"accelerator holding under 10%% of the bytes or alone among many):", clean(home))
}
