package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFileWriterDirect checks that Linux outputs do go through O_DIRECT
// where the filesystem takes it and writing behind is turned off.
func TestFileWriterDirect(t *testing.T) {
	defer func() { WriteBehind = true }()
	WriteBehind = false
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	probe, err := os.OpenFile(f.Name(), os.O_WRONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Skipf("this filesystem refuses O_DIRECT (%v); TestFileWriterBytes covered the ordinary path", err)
	}
	probe.Close()
	w := newWriter(f, nil)
	defer w.stop()
	if w.direct == nil {
		t.Fatal("O_DIRECT works here, but the writer did not use it")
	}
}
