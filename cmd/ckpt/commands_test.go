package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCommandNames: every registered name is the name of the command its
// constructor builds, once; commandsFor picks by these names.
func TestCommandNames(t *testing.T) {
	s := newStreams(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	seen := map[string]bool{}
	for _, c := range commands {
		if got := c.mk(s).Name(); got != c.name {
			t.Errorf("registered as %q, builds %q", c.name, got)
		}
		if seen[c.name] {
			t.Errorf("%q registered twice", c.name)
		}
		seen[c.name] = true
	}
	if len(commands) < 9 {
		t.Errorf("%d commands registered", len(commands))
	}
}

// TestCommandsForBuildsOne: a command line that names a command builds
// that command alone, a plain --version none (what start-up saves), and
// anything else every command.
func TestCommandsForBuildsOne(t *testing.T) {
	names := func(cs []command) string {
		var n []string
		for _, c := range cs {
			n = append(n, c.name)
		}
		return strings.Join(n, " ")
	}
	all := names(commands)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "a.pt", "b.safetensors"}, "convert"},
		{[]string{"-q", "inspect", "--json", "x"}, "inspect"},
		{[]string{"--quiet", "scan", "-"}, "scan"},
		{[]string{"version"}, "version"},
		{[]string{"--version"}, ""},
		{[]string{"-v", "-q"}, ""},
		{[]string{"--version", "--help"}, all},
		{[]string{"-qv"}, all},
		{[]string{}, all},
		{[]string{"-q"}, all},
		{[]string{"help", "convert"}, all},
		{[]string{"completion", "bash"}, all},
		{[]string{"__complete", "convert", ""}, all},
		{[]string{"conver", "a"}, all},
		{[]string{"--", "convert"}, all},
		{[]string{"--version", "convert"}, all},
	} {
		if got := names(commandsFor(tc.args)); got != tc.want {
			t.Errorf("%q: built %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestCommandsForSameRun: a run on the commands commandsFor builds prints
// the same bytes and exits with the same code as one on all of them:
// help, usage errors, version, suggestions, completion and a real inspect.
func TestCommandsForSameRun(t *testing.T) {
	lines := [][]string{
		{"--version"}, {"-v"}, {"-q", "--version"}, {"version"}, {"version", "--json"},
		{}, {"--help"}, {"help", "convert"}, {"conver", "x"}, {"--version", "convert"}, {"convert", "--version"}, {"-v", "inspect", "x"},
		{"--version", "--help"}, {"-v", "-h"}, {"-v", "--", "x"}, {"-v", "-x"},
		{"completion", "bash"}, {"__complete", "convert", "--d"}, {"__complete", "in"},
		{"inspect", fx + "zip_archive.pt"}, {"inspect", "--json", fx + "zip_archive.pt"},
		{"scan", fx + "zip_archive.pt"}, {"inspect", fx + "no-such-file.pt"},
	}
	for _, c := range commands {
		lines = append(lines, []string{c.name, "--help"}, []string{c.name, "--no-such-flag"}, []string{"-q", c.name, "-h"})
		if c.name != "devices" && c.name != "version" { // these two run without arguments
			lines = append(lines, []string{c.name})
		}
	}
	for _, args := range lines {
		var out1, err1, out2, err2 bytes.Buffer
		code1 := runCommands(context.Background(), args, newStreams(strings.NewReader(""), &out1, &err1), commandsFor(args))
		code2 := runCommands(context.Background(), args, newStreams(strings.NewReader(""), &out2, &err2), commands)
		if code1 != code2 || out1.String() != out2.String() || err1.String() != err2.String() {
			t.Errorf("%q: built alone: exit %d, stdout %q, stderr %q; among all: exit %d, stdout %q, stderr %q",
				args, code1, clipText(out1.String()), clipText(err1.String()), code2, clipText(out2.String()), clipText(err2.String()))
		}
		if out1.Len()+err1.Len() == 0 {
			t.Errorf("%q printed nothing", args)
		}
	}
}

func clipText(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
