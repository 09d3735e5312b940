package main

import (
	"io"
	"strings"
	"testing"
)

// BenchmarkRootCmd: the command tree every invocation builds before it
// runs a command (start-up, issue 35).
func BenchmarkRootCmd(b *testing.B) {
	b.ReportAllocs()
	s := newStreams(strings.NewReader(""), io.Discard, io.Discard)
	for b.Loop() {
		newRootCmd(s, commands)
	}
}
