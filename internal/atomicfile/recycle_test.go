package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// budgetWrite writes data through a Writer with an unlimited page-cache
// budget and returns the Writer (finished) and the file's bytes.
func budgetWrite(t *testing.T, data []byte) (*Writer, []byte) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := newWriter(f, Unlimited())
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return w, got
}

// TestRecycleProbe checks when a Writer turns to recycling its budget's
// page cache: after dearProbes measured writes in a row that cost more
// CPU than slowWrite, not after fewer, not when the thread changed
// across the writes, and not when they are cheap; and that recycled
// windows are started, then waited for and dropped behindDepth back.
func TestRecycleProbe(t *testing.T) {
	data := make([]byte, (probeEvery*dearProbes+12)*outputBlock)
	fill(data, 13)
	for _, c := range []struct {
		name    string
		cost    float64 // CPU nanoseconds a byte each write costs
		sameTid bool
		dearTo  int64 // the measured writes are dear until they add up to this; -1: all
		want    bool
	}{
		{"cheap", 0.3, true, -1, false},
		{"dear", 3, true, -1, true},
		{"dear for fewer than dearProbes", 3, true, (dearProbes - 1) * cachedBlock, false},
		{"thread changed", 3, false, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cpu, written int64
			tid, calls := 0, 0
			cpu0 := threadCPU
			defer func() { threadCPU = cpu0 }()
			threadCPU = func() (int, int64) {
				// Called before and after each measured
				// write (of a full buffer of cachedBlock
				// bytes: Write below); the second call is
				// charged the write's cost.
				calls++
				if c.sameTid {
					tid = 7
				} else {
					tid++
				}
				if calls%2 == 0 {
					if c.dearTo < 0 || written < c.dearTo {
						cpu += int64(c.cost * cachedBlock)
					}
					written += cachedBlock
				}
				return tid, cpu
			}
			rec := recordRanges(t, nil)
			w, got := budgetWrite(t, data)
			if string(got) != string(data) {
				t.Fatal("the file differs from what was written")
			}
			if w.recycling() != c.want {
				t.Fatalf("recycling %v, want %v", w.recycling(), c.want)
			}
			starts, waits, drops := 0, 0, 0
			for _, k := range *rec {
				switch k.op {
				case "wait":
					waits++
				case "start":
					starts++
				case "drop":
					drops++
					if waits != drops {
						t.Fatalf("a recycled window dropped before it was waited for: %v", *rec)
					}
				}
			}
			if !c.want && starts != 0 {
				t.Errorf("%d windows started without recycling", starts)
			}
			if c.want && (starts == 0 || drops == 0 || starts > len(data)/int(behindWindow)) {
				t.Errorf("recycling: %d windows started, %d dropped; want some of each, at most %d started", starts, drops, len(data)/int(behindWindow))
			}
		})
	}
}

// TestRecycleModes checks RecycleAlways (every window of the budget's
// bytes started, and waited for and dropped behindDepth back) and
// RecycleNever (no window, whatever the writes cost).
func TestRecycleModes(t *testing.T) {
	defer func() { Recycle = RecycleWhenSlow }()
	data := make([]byte, 8*outputBlock+5)
	fill(data, 17)
	for _, mode := range []RecycleMode{RecycleAlways, RecycleNever} {
		Recycle = mode
		cpu0 := threadCPU
		var cpu int64
		threadCPU = func() (int, int64) { cpu += 100 * cachedBlock; return 1, cpu } // always dear
		calls := recordRanges(t, nil)
		w, got := budgetWrite(t, data)
		threadCPU = cpu0
		if string(got) != string(data) {
			t.Fatalf("mode %d: the file differs", mode)
		}
		starts, waits := 0, 0
		for _, k := range *calls {
			switch k.op {
			case "start":
				starts++
			case "wait":
				waits++
			}
		}
		switch mode {
		case RecycleAlways:
			if want := len(data) / int(behindWindow); starts < want || waits != starts-behindDepth {
				t.Errorf("always: %d windows started, %d waited for; want %d started, all but the last %d waited for", starts, waits, want, behindDepth)
			}
		case RecycleNever:
			if starts != 0 || w.recycling() {
				t.Errorf("never: %d windows started, recycling %v", starts, w.recycling())
			}
		}
	}
}
