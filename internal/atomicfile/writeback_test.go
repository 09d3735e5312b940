package atomicfile

import (
	"bytes"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

func TestThreshold(t *testing.T) {
	mem := "MemTotal:       24000000 kB\nMemFree:        20000000 kB\nMemAvailable:   23000000 kB\n"
	for _, c := range []struct {
		name                                string
		bytes, ratio, meminfo, cgMax, cgCur string
		want                                int64
	}{
		{"bytes win", "500000000\n", "10\n", mem, "", "", 500000000},
		{"ratio of available", "0\n", "10\n", mem, "", "", 23000000 * 1024 / 100 * 10},
		{"cgroup v2 max", "0", "10", mem, "4000000000\n", "1000000000\n", 3000000000 / 100 * 10},
		{"cgroup v2 unlimited", "0", "10", mem, "max\n", "1000\n", 23000000 * 1024 / 100 * 10},
		{"cgroup v1 unlimited", "0", "10", mem, "9223372036854771712\n", "1496858624\n", 23000000 * 1024 / 100 * 10},
		{"cgroup over its limit", "0", "10", mem, "1000", "5000", 0},
		{"no MemAvailable", "0", "10", "MemTotal: 1 kB\n", "", "", 0},
		{"unreadable", "", "", "", "", "", 0},
		{"ratio out of range", "0", "101", mem, "", "", 0},
		{"huge MemAvailable", "0", "10", "MemAvailable: 99999999999999999999 kB\n", "", "", 0},
	} {
		if got := threshold(c.bytes, c.ratio, c.meminfo, c.cgMax, c.cgCur); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	if n := freerunNow(); n < 0 {
		t.Errorf("freerunNow %d", n)
	}
}

// TestFreerunBudget checks the free-run ceiling (mm/page-writeback.c:
// (background + dirty threshold) / 2) less the dirty and write-back pages.
func TestFreerunBudget(t *testing.T) {
	const g = 1 << 30
	for _, c := range []struct {
		name      string
		bg, dirty int64
		meminfo   string
		want      int64
	}{
		{"defaults of 23 GB available", 2 * g, 4 * g, "MemAvailable: 1 kB\n", 3 * g},
		{"dirty pages count", 2 * g, 4 * g, "Dirty: 1048576 kB\nWriteback: 524288 kB\n", 3*g - g - g/2},
		{"more dirty than the ceiling", 2 * g, 4 * g, "Dirty: 4194304 kB\n", 0},
		{"background not below dirty: halved", 4 * g, 4 * g, "", 3 * g},
		{"no background threshold", 0, 4 * g, "", 3 * g},
		{"no dirty threshold", 2 * g, 0, "", 0},
		{"unparsable dirty count", 2 * g, 4 * g, "Dirty: x kB\n", 0},
		{"huge dirty count", 2 * g, 4 * g, "Dirty: 99999999999999999999 kB\n", 0},
	} {
		if got := freerunBudget(c.bg, c.dirty, c.meminfo); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestFileWriterBudget checks that buffers go through the page cache while
// the shared budget lasts and directly after, and that the file is right.
func TestFileWriterBudget(t *testing.T) {
	data := make([]byte, 3*outputBlock+directAlign+17)
	fill(data, 9)
	// The buffers' size: cachedBlock writing behind (writer.go).
	const blk = cachedBlock
	for _, c := range []struct {
		budget, cached, left int64
	}{
		{0, 0, 0},
		{blk + 1, blk, 1},
		{blk - 1, directAlign, blk - 1 - directAlign}, // only the last aligned piece fits
		{1 << 40, 3*outputBlock + directAlign, 1<<40 - 3*outputBlock - directAlign},
	} {
		budget := new(atomic.Int64)
		budget.Store(c.budget)
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		w := newWriter(f, budget)
		if !writeBack(t, w, f, data, true) {
			t.Errorf("budget %d: the file differs", c.budget)
		}
		if w.inCache.Load() != c.cached || budget.Load() != c.left {
			t.Errorf("budget %d: %d bytes through the page cache, %d left; want %d, %d", c.budget, w.inCache.Load(), budget.Load(), c.cached, c.left)
		}
	}
}

// pieces records the lengths of the writes through the page cache, and
// how many start off a multiple of cachedPiece or cross one.
type pieces struct {
	f         *os.File
	longest   int
	n         int
	unaligned int
	crossing  int
}

func (p *pieces) WriteAt(b []byte, off int64) (int, error) {
	p.longest = max(p.longest, len(b))
	p.n++
	if off%cachedPiece != 0 {
		p.unaligned++
	}
	if len(b) > 0 && off/cachedPiece != (off+int64(len(b))-1)/cachedPiece {
		p.crossing++
	}
	return p.f.WriteAt(b, off)
}

// TestFileWriterCachedPieces: whatever goes through the page cache (the
// budget's share, the tail, a filesystem without direct I/O) is written
// in pieces of at most cachedPiece bytes, so that the kernel makes small
// folios (see writer.go), and the file is still right.
func TestFileWriterCachedPieces(t *testing.T) {
	data := make([]byte, 2*outputBlock+directAlign+5)
	fill(data, 11)
	for _, c := range []struct {
		name     string
		budget   *atomic.Int64
		buffered bool
	}{
		{"budget", Unlimited(), false},
		{"no direct I/O", nil, true},
	} {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		forceBuffered = c.buffered
		w := newWriter(f, c.budget)
		forceBuffered = false
		rec := &pieces{f: f}
		w.cached = rec
		if !writeBack(t, w, f, data, false) {
			t.Errorf("%s: the file differs", c.name)
		}
		if rec.longest > cachedPiece || rec.n < len(data)/cachedPiece {
			t.Errorf("%s: %d writes through the page cache, the longest %d bytes; want at least %d of at most %d", c.name, rec.n, rec.longest, len(data)/cachedPiece, cachedPiece)
		}
		if rec.crossing != 0 {
			t.Errorf("%s: %d writes through the page cache cross a multiple of %d bytes, want none", c.name, rec.crossing, cachedPiece)
		}
	}
}

// writeBack writes data through w (ReadFrom or Write), finishes it,
// closes f and reports whether f holds data.
func writeBack(t *testing.T, w *Writer, f *os.File, data []byte, readFrom bool) bool {
	t.Helper()
	var err error
	if readFrom {
		_, err = w.ReadFrom(bytes.NewReader(data))
	} else {
		_, err = w.Write(data)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	f.Close()
	return bytes.Equal(got, data)
}
