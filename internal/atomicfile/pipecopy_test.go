package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// randomBytes returns n pseudo-random bytes from seed.
func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// inputFile writes src to dir/in and returns it open for reading (closed
// at the test's end).
func inputFile(t *testing.T, dir string, src []byte) *os.File {
	t.Helper()
	in := filepath.Join(dir, "in")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// pieceRange is a fileRange that records the longest Read asked of it,
// and fails with failAt's error once that many bytes are read.
type pieceRange struct {
	fileRange
	longest int
	failAt  int64
	fail    error
}

func (r *pieceRange) Read(p []byte) (int, error) {
	r.longest = max(r.longest, len(p))
	if r.fail != nil && r.read >= r.failAt {
		return 0, r.fail
	}
	return r.fileRange.Read(p)
}

// TestPipedCopy: with the piped copy, a RangeReader's bytes going to the
// page cache are read through its Read (where its checks are), in pieces
// of at most pipeRead bytes, and land at their place between the bytes
// written before and after; none goes through copy_file_range or the
// direct handle, they are counted in the budget and RangeCopies, the
// Writer cycles through at most pipeBuffers buffers, and an error of the
// reader is ReadFrom's. A reader that ends early leaves the short input
// to be reported (io.CopyN's EOF).
func TestPipedCopy(t *testing.T) {
	oldPiped, oldBlock, oldCopy := PipedCopy, PipeBlock, copyFile
	defer func() { PipedCopy, PipeBlock, copyFile = oldPiped, oldBlock, oldCopy }()
	PipedCopy = true
	PipeBlock = pipeRead + 4096 // a partial read ends every block
	copyFile = func(*os.File, int64, *os.File, int64, int64) (int64, error) {
		t.Error("copy_file_range called by the piped copy")
		return 0, errors.New("no")
	}
	src := randomBytes(7, 5*pipeRead+12345)
	dir := t.TempDir()
	inF := inputFile(t, dir, src)
	head := []byte("header of an odd length")
	const skip = 1001
	n := int64(4*pipeRead + 777)
	errRead := errors.New("check failed")
	for _, tc := range []string{"whole", "failing", "short"} {
		f, err := os.Create(filepath.Join(dir, tc))
		if err != nil {
			t.Fatal(err)
		}
		const budget = 1 << 40
		w := newWriter(f, NewBudget(budget))
		if w.direct != nil {
			w.direct.Close()
		}
		d := &countingDirect{f: f}
		w.direct = d
		r := &pieceRange{fileRange: fileRange{f: inF, off: skip, n: n}}
		want := n
		switch tc {
		case "failing":
			r.failAt, r.fail = 2*pipeRead, errRead
		case "short":
			// The range runs past the input's end.
			r.n = int64(len(src)) - skip + 100
			want = int64(len(src)) - skip
		}
		before := RangeCopies.Load()
		w.Write(head)
		k, err := io.CopyN(w, r, r.n)
		switch tc {
		case "failing":
			if !errors.Is(err, errRead) || k != r.read || k < r.failAt {
				t.Errorf("failing reader: CopyN %d, %v; want the %d bytes read and its error", k, err, r.read)
			}
			w.stop()
			w.release()
			f.Close()
			continue
		case "short":
			if err != io.EOF || k != want {
				t.Errorf("short input: CopyN %d, %v; want %d, EOF", k, err, want)
			}
		default:
			if err != nil || k != n {
				t.Fatalf("CopyN %d, %v", k, err)
			}
		}
		w.Write([]byte("tail"))
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(f.Name())
		exp := append(append(append([]byte{}, head...), src[skip:skip+want]...), "tail"...)
		if !bytes.Equal(got, exp) {
			t.Errorf("%s: output differs", tc)
		}
		if len(r.copied) != 0 || r.read != want || RangeCopies.Load()-before != want {
			t.Errorf("%s: %d pieces copied in the kernel, %d bytes read, counter %d; want none, %d, %d", tc, len(r.copied), r.read, RangeCopies.Load()-before, want, want)
		}
		if r.longest > pipeRead {
			t.Errorf("%s: a read of %d bytes, want at most %d (checked while in cache)", tc, r.longest, pipeRead)
		}
		if d.writes != 0 {
			t.Errorf("%s: %d direct writes, want the page cache only", tc, d.writes)
		}
		if w.pipeMade > pipeBuffers || w.pipeMade == 0 {
			t.Errorf("%s: %d piped buffers made, want 1..%d", tc, w.pipeMade, pipeBuffers)
		}
		// Every byte counted once; the last partial page is written
		// outside the budget (finish).
		if used := budget - w.budget.Load(); used < int64(len(head))+want || used > int64(len(got)) {
			t.Errorf("%s: %d bytes counted in the budget, want %d to %d", tc, used, int64(len(head))+want, len(got))
		}
		f.Close()
	}
}

// TestPipeLimit: a file's range copies are piped until the next one
// would take it past PipeLimit; that one and later ones go through
// copy_file_range (reported as Copied pieces, not read).
func TestPipeLimit(t *testing.T) {
	oldPiped, oldLimit := PipedCopy, PipeLimit
	defer func() { PipedCopy, PipeLimit = oldPiped, oldLimit }()
	PipedCopy, PipeLimit = true, 3*pipeRead
	src, inF, f := pipeFiles(t, 4*pipeRead)
	w := newWriter(f, NewBudget(1<<40))
	var want []byte
	for i, n := range []int64{2 * pipeRead, pipeRead, pipeRead} {
		r := &fileRange{f: inF, n: n}
		if _, err := io.Copy(w, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, src[:n]...)
		piped := i < 2 // 2 + 1 reaches the limit; the third would pass it
		if piped != (len(r.copied) == 0) || piped != (r.read == n) {
			t.Errorf("copy %d: %d pieces copied in the kernel, %d bytes read; want piped %v", i, len(r.copied), r.read, piped)
		}
	}
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, want) {
		t.Error("output differs")
	}
}

// TestPipedBlocksAligned: after a header of odd length, the piped copy's
// first block ends on a multiple of cachedPiece, so that every later
// write through the page cache starts on one and none crosses one (the
// kernel gives writes off those boundaries smaller folios: writer.go),
// and the file is still right.
func TestPipedBlocksAligned(t *testing.T) {
	oldPiped := PipedCopy
	defer func() { PipedCopy = oldPiped }()
	PipedCopy = true
	src, inF, f := pipeFiles(t, 6*cachedPiece+4321)
	w := newWriter(f, Unlimited())
	rec := &pieces{f: f}
	w.cached = rec
	head := []byte("a header of 8+23 bytes!")
	w.Write(head)
	r := &fileRange{f: inF, off: 3, n: int64(len(src)) - 3}
	if k, err := io.CopyN(w, r, r.n); err != nil || k != r.n {
		t.Fatalf("CopyN %d, %v", k, err)
	}
	w.Write([]byte("tail"))
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if want := append(append(append([]byte{}, head...), src[3:]...), "tail"...); !bytes.Equal(got, want) {
		t.Fatal("output differs")
	}
	// The header's piece starts at 0; the first piped block and the
	// tail start where the bytes before them ended.
	if rec.crossing != 0 || rec.unaligned > 2 || rec.n < len(src)/cachedPiece {
		t.Errorf("%d writes, %d off a multiple of %d bytes, %d across one; want at least %d, at most 2 off and none across",
			rec.n, rec.unaligned, cachedPiece, rec.crossing, len(src)/cachedPiece)
	}
}

// pipeFiles returns n random bytes, an input file holding them and an
// empty output file (both closed at the test's end).
func pipeFiles(t *testing.T, n int) ([]byte, *os.File, *os.File) {
	t.Helper()
	src := randomBytes(9, n)
	dir := t.TempDir()
	inF := inputFile(t, dir, src)
	f, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return src, inF, f
}
