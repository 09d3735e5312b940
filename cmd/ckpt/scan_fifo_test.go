//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

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
