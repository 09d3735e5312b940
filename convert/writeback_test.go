package convert

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/atomicfile"
	"github.com/ckpt-dev/ckpt/verify"
)

// TestWriteBack checks which outputs are synced: every one with WithSync,
// none by default, whether the page-cache budget covers them or not; each
// format's files alike, and the outputs the same.
func TestWriteBack(t *testing.T) {
	var syncs atomic.Int64
	defer func(f func(*os.File) error) { atomicfile.SyncFile = f }(atomicfile.SyncFile)
	atomicfile.SyncFile = func(f *os.File) error { syncs.Add(1); return f.Sync() }
	defer func(f func() int64) { atomicfile.WriteBackBudget = f }(atomicfile.WriteBackBudget)
	in := fixtures + "training.pt"
	for _, c := range []struct {
		name   string
		budget int64
		sync   bool
	}{
		{"in the page cache", 1 << 40, false},
		{"WithSync", 1 << 40, true},
		{"over the budget", 0, false},
	} {
		atomicfile.WriteBackBudget = func() int64 { return c.budget }
		for _, out := range []struct {
			name  string
			opts  []Option
			files int64 // fsyncs with WithSync; -1: the shards and the index
		}{
			{"model.safetensors", nil, 1},
			{"model.pt", nil, 1},
			{"sharded", []Option{WithMaxShardSize(200), WithFormat(Safetensors)}, -1},
			{"dcp", []Option{WithFormat(DCP), WithDCPRanks(2)}, 3},
		} {
			syncs.Store(0)
			path := filepath.Join(t.TempDir(), out.name)
			sum := convert(t, in, path, append(out.opts, WithSync(c.sync))...)
			want := out.files
			if want < 0 {
				want = int64(len(sum.Files) + 1)
			}
			if !c.sync {
				want = 0
			}
			if sum.Synced != c.sync || syncs.Load() != want {
				t.Errorf("%s, %s: Synced %v with %d fsyncs, want %v with %d", c.name, out.name, sum.Synced, syncs.Load(), c.sync, want)
			}
			if sum.Index != "" && out.name != "dcp" {
				path = sum.Index
			}
			noDiff(t, in, path, verify.CompareOptions{})
		}
	}
}
