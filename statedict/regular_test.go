//go:build unix

package statedict

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openSoon is Open that fails the test if Open blocks.
func openSoon(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		ck, err := Open(path)
		if err == nil {
			ck.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Open(%s) blocks", path)
		return nil
	}
}

// TestOpenNotRegular: a FIFO given as the checkpoint, or as a shard of an
// index, is refused at once, naming it, instead of blocking forever.
func TestOpenNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	if err := openSoon(t, fifo); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), fifo) {
		t.Errorf("FIFO: %v", err)
	}

	// A sharded checkpoint with one shard replaced by a FIFO.
	src := "../testdata/fixtures/sharded_st"
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	sh := filepath.Join(dir, "sharded")
	os.Mkdir(sh, 0o755)
	var shard string
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(sh, e.Name())
		if shard == "" && strings.HasSuffix(e.Name(), ".safetensors") {
			shard = p
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		os.WriteFile(p, b, 0o644)
	}
	if err := openSoon(t, sh); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), shard) {
		t.Errorf("FIFO shard: %v", err)
	}
}
