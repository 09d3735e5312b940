package devicecopy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ckpt-dev/ckpt/statedict"
)

// A file truncated after it was mapped makes reading the lost pages fault
// (SIGBUS): LoadHost's hashing returns that as an error instead of
// crashing the process.
func TestHashMappedTruncatedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	page := os.Getpagesize()
	if err := os.WriteFile(path, make([]byte, 8*page), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fm := &fileMaps{}
	defer fm.release()
	data := fm.region(f, 100, int64(7*page))
	if data == nil {
		t.Fatal("no mapping")
	}
	if fm.region(f, int64(8*page)-10, 11) != nil || fm.region(f, -1, 1) != nil {
		t.Error("a region outside the file was mapped")
	}
	if err := os.Truncate(path, int64(page)); err != nil {
		t.Fatal(err)
	}
	hs := &HostStorage{Storage: &statedict.Storage{Key: "0", NBytes: int64(len(data))}}
	err = hashMapped(context.Background(), hs, data, func(int64) {})
	if err == nil || !strings.Contains(err.Error(), "the file changed while it was read") {
		t.Fatalf("hashMapped of a truncated file: %v", err)
	}
	if hs.Data != nil || hs.Mapped {
		t.Error("a failed storage kept its data")
	}
}
