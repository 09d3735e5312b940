package main

import (
	"io"
	"strings"
	"testing"
)

// BenchmarkRootCmd: the command tree an invocation builds before it runs
// a command (start-up, issue 35): every command (help, completion), the
// one a command line names, none for --version.
func BenchmarkRootCmd(b *testing.B) {
	s := newStreams(strings.NewReader(""), io.Discard, io.Discard)
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"all", []string{"--help"}},
		{"convert", []string{"convert", "a.pt", "b.safetensors"}},
		{"inspect", []string{"inspect", "a.pt"}},
		{"version-flag", []string{"--version"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				newRootCmd(s, commandsFor(bc.args))
			}
		})
	}
}
