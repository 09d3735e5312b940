//go:build unix

package scan

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/statedict"
)

// TestFIFORefused: a FIFO named on the command line is refused at once
// (opening it for reading would wait for a writer forever); in a
// directory it is not a file to scan.
func TestFIFORefused(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pipe.pt")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Paths(context.Background(), []string{p})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, statedict.ErrNotRegular) {
			t.Errorf("FIFO: %v, want ErrNotRegular", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("scan of a FIFO blocked")
	}
	rep, err := Paths(context.Background(), []string{dir})
	if err != nil || rep.Files != 0 || len(rep.Problems) != 0 {
		t.Errorf("directory with a FIFO: %v %+v", err, rep)
	}
}
