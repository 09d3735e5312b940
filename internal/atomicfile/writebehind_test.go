package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// rangeCall is one call of syncRange or dropRange.
type rangeCall struct {
	op     string // "start", "wait" or "drop"
	off, n int64
}

// recordRanges replaces syncRange and dropRange with recorders (which
// still call the real ones unless fail says otherwise) for the test.
func recordRanges(t *testing.T, fail func(rangeCall) error) *[]rangeCall {
	t.Helper()
	var mu sync.Mutex
	calls := new([]rangeCall)
	sync0, drop0 := syncRange, dropRange
	t.Cleanup(func() { syncRange, dropRange = sync0, drop0 })
	syncRange = func(f *os.File, off, n int64, wait bool) error {
		c := rangeCall{"start", off, n}
		if wait {
			c.op = "wait"
		}
		mu.Lock()
		*calls = append(*calls, c)
		mu.Unlock()
		if fail != nil {
			if err := fail(c); err != nil {
				return err
			}
		}
		return sync0(f, off, n, wait)
	}
	dropRange = func(f *os.File, off, n int64) {
		mu.Lock()
		*calls = append(*calls, rangeCall{"drop", off, n})
		mu.Unlock()
		drop0(f, off, n)
	}
	return calls
}

// writeBehindFile writes data through a Writer with no page-cache budget
// (a synced output's writer) to a new file in dir and returns the file,
// and the error of finish.
func writeBehindFile(t *testing.T, dir string, data []byte) (*os.File, error) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	w := newWriter(f, nil)
	if _, ok := w.direct.(*behind); !ok {
		t.Fatalf("the writer's handle is %T, want writing behind", w.direct)
	}
	if _, err := w.Write(data); err != nil {
		w.stop()
		w.release()
		return f, err
	}
	return f, w.finish()
}

// TestWriteBehindWindows checks that bytes past the budget are written
// behind: the whole file in order, every behindWindow bytes a window
// whose write-back is started, each window behindDepth back waited for
// and then dropped, and the file's bytes right.
func TestWriteBehindWindows(t *testing.T) {
	defer func(w int64) { behindWindow = w }(behindWindow)
	behindWindow = outputBlock + outputBlock/2 // two buffers a window
	calls := recordRanges(t, nil)
	data := make([]byte, 13*outputBlock+directAlign+3)
	fill(data, 5)
	f, err := writeBehindFile(t, t.TempDir(), data)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if string(got) != string(data) {
		t.Fatal("the file differs from what was written")
	}
	var started, waited []rangeCall
	next := int64(0)
	for _, c := range *calls {
		switch c.op {
		case "start":
			if c.off != next {
				t.Fatalf("window started at %d, want %d (the windows in order, without gaps): %v", c.off, next, *calls)
			}
			next = c.off + c.n
			started = append(started, c)
		case "wait":
			waited = append(waited, c)
			if len(started) < len(waited)+behindDepth {
				t.Fatalf("window %d waited for with only %d started: the wait is behindDepth windows back", len(waited)-1, len(started))
			}
		case "drop":
			if len(waited) == 0 || waited[len(waited)-1].off != c.off || waited[len(waited)-1].n != c.n {
				t.Fatalf("dropped %d+%d, not the window just waited for: %v", c.off, c.n, *calls)
			}
		}
	}
	// The tail (less than directAlign) goes through the ordinary handle
	// after the writer stops; every full buffer is in a window.
	if want := int64(len(data)) &^ (directAlign - 1); next != want {
		t.Errorf("windows cover %d bytes, want %d", next, want)
	}
	for i, c := range started[:len(started)-1] {
		if c.n < behindWindow || c.n >= behindWindow+outputBlock {
			t.Errorf("window %d is %d bytes, want %d to %d (whole writes)", i, c.n, behindWindow, behindWindow+outputBlock)
		}
	}
	if want := len(started) - behindDepth; len(waited) != want {
		t.Errorf("%d windows waited for, want %d (all but the last %d)", len(waited), want, behindDepth)
	}
}

// TestWriteBehindError checks that an error of the write-back of a
// window is the write's error: a later write or finish reports it.
func TestWriteBehindError(t *testing.T) {
	defer func(w int64) { behindWindow = w }(behindWindow)
	behindWindow = 1 << 20
	eio := syscall.EIO
	var waits atomic.Int32
	recordRanges(t, func(c rangeCall) error {
		if c.op == "wait" && waits.Add(1) == 2 {
			return eio
		}
		return nil
	})
	data := make([]byte, 10*outputBlock)
	_, err := writeBehindFile(t, t.TempDir(), data)
	if !errors.Is(err, eio) {
		t.Fatalf("finish: %v, want the write-back's EIO", err)
	}
}

// TestWriteBehindRefused checks that a filesystem or system without
// sync_file_range gets ordinary buffered writes: no error, the bytes
// right, and no call after the refusal.
func TestWriteBehindRefused(t *testing.T) {
	defer func(w int64) { behindWindow = w }(behindWindow)
	behindWindow = 1 << 20
	for _, refusal := range []error{errNoWriteBehind, syscall.EINVAL, syscall.ENOSYS, syscall.ESPIPE} {
		calls := recordRanges(t, func(rangeCall) error { return refusal })
		data := make([]byte, 5*outputBlock+7)
		fill(data, 3)
		f, err := writeBehindFile(t, t.TempDir(), data)
		if err != nil {
			t.Fatalf("%v: %v", refusal, err)
		}
		got, _ := os.ReadFile(f.Name())
		if string(got) != string(data) {
			t.Fatalf("%v: the file differs", refusal)
		}
		if len(*calls) != 1 {
			t.Errorf("%v: %d calls, want the one refused: %v", refusal, len(*calls), *calls)
		}
	}
}

// TestWriteBehindPiped checks that a RangeReader's bytes bound for a
// synced output (no page-cache budget) go through the piped copy, read
// through the reader's Read in pieces of at most pipeRead (where its
// checks are) and written behind: every byte in a window whose
// write-back is waited for or left to the final fsync, none counted as
// page cache of the budget, and the file right.
func TestWriteBehindPiped(t *testing.T) {
	defer func(w int64) { behindWindow = w }(behindWindow)
	behindWindow = 1 << 20
	calls := recordRanges(t, nil)
	src, inF, f := pipeFiles(t, 9*PipeBlock+12345)
	w := newWriter(f, nil)
	if _, ok := w.direct.(*behind); !ok {
		t.Fatalf("the writer's handle is %T, want writing behind", w.direct)
	}
	head := []byte("header of 17 byte")
	w.Write(head)
	r := &pieceRange{fileRange: fileRange{f: inF, n: int64(len(src))}}
	if k, err := io.CopyN(w, r, r.n); err != nil || k != r.n {
		t.Fatalf("CopyN %d, %v", k, err)
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if want := append(append([]byte{}, head...), src...); !bytes.Equal(got, want) {
		t.Fatal("output differs")
	}
	if r.read != r.n || r.longest > pipeRead {
		t.Errorf("%d of %d bytes read through Read, the longest read %d; want all, at most %d", r.read, r.n, r.longest, pipeRead)
	}
	if w.inCache.Load() != 0 {
		t.Errorf("%d bytes counted as the budget's page cache, want none", w.inCache.Load())
	}
	var covered, waited int64
	next := int64(-1)
	for _, c := range *calls {
		switch c.op {
		case "start":
			if next >= 0 && c.off != next {
				t.Errorf("window at %d, want %d: windows in order without gaps", c.off, next)
			}
			next = c.off + c.n
			covered += c.n
		case "wait":
			waited++
		}
	}
	// The header waits in the first buffer until the copy sends it; the
	// bytes of the copy and the header are in windows, the last few
	// windows left to the kernel.
	if covered < int64(len(src)) || waited == 0 {
		t.Errorf("windows cover %d bytes (%d waited for), want the copy's %d, some waited for", covered, waited, len(src))
	}
}
