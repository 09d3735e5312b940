package atomicfile

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fileRange is a RangeReader over [off, off+n) of f that records what
// the Writer reports copied.
type fileRange struct {
	f      *os.File
	off, n int64
	pos    int64
	read   int64      // bytes read through Read
	copied [][2]int64 // (output offset, length) of each piece copied
	out    *os.File
}

func (r *fileRange) FileRange() (*os.File, int64, int64) { return r.f, r.off + r.pos, r.n - r.pos }

func (r *fileRange) Copied(out *os.File, outOff, k int64) error {
	r.pos += k
	r.out = out
	r.copied = append(r.copied, [2]int64{outOff, k})
	return nil
}

func (r *fileRange) Read(p []byte) (int, error) {
	if r.pos >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.pos)]
	k, err := r.f.ReadAt(p, r.off+r.pos)
	r.pos += int64(k)
	r.read += int64(k)
	if err == io.EOF && k > 0 {
		err = nil
	}
	return k, err
}

// TestReadFromCopiesRange: a RangeReader's bytes land at their place in
// the output, between bytes written before and after, whether the kernel
// copies them all, refuses at once (EXDEV: they are read), or stops part
// way (the rest is read), or the output is past its page-cache budget
// or has none (synced) with direct I/O at hand (read); io.CopyN's LimitedReader is seen through; the
// pieces reported copied are the output's ranges that hold them.
func TestReadFromCopiesRange(t *testing.T) {
	kernelCopy(t)
	src := randomBytes(5, 3*copyPiece+12345)
	dir := t.TempDir()
	inF := inputFile(t, dir, src)
	head := []byte("header of an odd length")
	const skip, n = 1001, 2*copyPiece + 777
	want := append(append(append([]byte{}, head...), src[skip:skip+n]...), "tail"...)
	real := copyFile
	defer func() { copyFile = real }()
	for _, tc := range []struct {
		name     string
		copyFn   func(*os.File, int64, *os.File, int64, int64) (int64, error)
		wantCopy int64
	}{
		{"kernel", real, n},
		{"refused", func(*os.File, int64, *os.File, int64, int64) (int64, error) { return 0, syscall.EXDEV }, 0},
		{"short", func(s *os.File, so int64, d *os.File, do, k int64) (int64, error) {
			if do > int64(len(head))+copyPiece {
				return 0, syscall.EINVAL
			}
			return real(s, so, d, do, k)
		}, 2 * copyPiece},
		{"over budget", real, 0},
		{"synced", real, 0},
		{"synced, buffered", real, n},
	} {
		copyFile = tc.copyFn
		f, err := os.Create(filepath.Join(dir, tc.name))
		if err != nil {
			t.Fatal(err)
		}
		w := newWriter(f, NewBudget(1<<40))
		if tc.name == "over budget" {
			// Past the budget, with direct I/O at hand, the bytes
			// are read and written directly.
			if w.direct != nil {
				w.direct.Close()
			}
			w.direct = &refusing{f: f, ok: 1 << 30}
			w.budget = NewBudget(copyPiece)
		}
		if strings.HasPrefix(tc.name, "synced") {
			// A synced output (no budget) with direct I/O at hand is
			// read and written directly; without direct I/O its
			// bytes go to the page cache anyway, and are copied.
			if w.direct != nil {
				w.direct.Close()
			}
			w.direct, w.budget = &refusing{f: f, ok: 1 << 30}, nil
			if tc.name == "synced, buffered" {
				w.direct.Close()
				w.direct = nil
			}
		}
		before := RangeCopies.Load()
		r := &fileRange{f: inF, off: skip, n: 3 * copyPiece}
		w.Write(head)
		if k, err := io.CopyN(w, r, n); err != nil || k != n {
			t.Fatalf("%s: CopyN %d, %v", tc.name, k, err)
		}
		w.Write([]byte("tail"))
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(f.Name())
		if !bytes.Equal(got, want) {
			t.Errorf("%s: output differs", tc.name)
		}
		var copied int64
		for _, p := range r.copied {
			if r.out != f || !bytes.Equal(got[p[0]:p[0]+p[1]], src[skip+p[0]-int64(len(head)):][:p[1]]) {
				t.Errorf("%s: piece %v is not where its bytes are", tc.name, p)
			}
			copied += p[1]
		}
		if copied != tc.wantCopy || RangeCopies.Load()-before != tc.wantCopy || r.read != n-tc.wantCopy {
			t.Errorf("%s: copied %d (counter %d), read %d; want %d copied", tc.name, copied, RangeCopies.Load()-before, r.read, tc.wantCopy)
		}
		f.Close()
	}
}

// kernelCopy makes copyRange use copy_file_range (not the piped copy)
// for the rest of the test.
func kernelCopy(t *testing.T) {
	old := PipedCopy
	PipedCopy = false
	t.Cleanup(func() { PipedCopy = old })
}

// countingDirect is a direct handle that counts its writes.
type countingDirect struct {
	f      *os.File
	writes int
}

func (c *countingDirect) WriteAt(p []byte, off int64) (int, error) {
	if off%directAlign != 0 || len(p)%directAlign != 0 {
		return 0, syscall.EINVAL
	}
	c.writes++
	return c.f.WriteAt(p, off)
}

func (c *countingDirect) Close() error { return nil }

// TestCopyRealigns: after a copy leaves the output's offset unaligned,
// the buffers that follow end on aligned offsets again, so that once the
// page-cache budget is spent they are written directly.
func TestCopyRealigns(t *testing.T) {
	dir := t.TempDir()
	src := bytes.Repeat([]byte("0123456789abcdef"), int(MinRangeCopy)/16+77)
	in := filepath.Join(dir, "in")
	os.WriteFile(in, src, 0o644)
	inF, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer inF.Close()
	f, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := newWriter(f, NewBudget(int64(len(src))))
	if w.direct != nil {
		w.direct.Close()
	}
	d := &countingDirect{f: f}
	w.direct = d
	tail := bytes.Repeat([]byte{7}, 3*outputBlock)
	w.Write([]byte("odd"))
	if _, err := io.Copy(w, &fileRange{f: inF, n: int64(len(src))}); err != nil {
		t.Fatal(err)
	}
	w.Write(tail)
	if err := w.finish(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, append(append([]byte("odd"), src...), tail...)) {
		t.Error("output differs")
	}
	if d.writes < 2 {
		t.Errorf("%d direct writes after the copy, want the full buffers written directly", d.writes)
	}
}

// TestCopyReservesBudget: a copy into the page cache takes its whole
// length from the shared budget before its first byte, so that two
// writers (shards written at once) cannot both pass the check and
// together exceed it: while one copies, the other, asking for the same
// length, is refused (its bytes go the direct way). A copy that stops
// short gives back what it did not copy.
func TestCopyReservesBudget(t *testing.T) {
	kernelCopy(t)
	dir := t.TempDir()
	src := bytes.Repeat([]byte("0123456789abcdef"), int(MinRangeCopy)/16*2)
	size := int64(len(src))
	in := filepath.Join(dir, "in")
	os.WriteFile(in, src, 0o644)
	inF, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer inF.Close()
	budget := NewBudget(size + 100)
	writer := func(name string) *Writer {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		w := newWriter(f, budget)
		if w.direct != nil {
			w.direct.Close()
		}
		w.direct = &refusing{f: f, ok: 1 << 30}
		return w
	}
	a, b := writer("a"), writer("b")
	real := copyFile
	defer func() { copyFile = real }()
	var during int64 = -1
	var otherCopied int64 = -1
	copyFile = func(s *os.File, so int64, d *os.File, do, k int64) (int64, error) {
		if during < 0 {
			during = budget.Load()
			// The other writer, meanwhile, is refused.
			copyFile = real
			n, fallback, err := b.copyRange(&fileRange{f: inF, n: size}, -1)
			otherCopied = n
			if err != nil || !fallback {
				t.Errorf("second writer: copied %d, fallback %v, %v", n, fallback, err)
			}
			copyFile = func(s *os.File, so int64, d *os.File, do, k int64) (int64, error) { return 0, nil }
			return real(s, so, d, do, k/2)
		}
		return 0, nil
	}
	n, fallback, err := a.copyRange(&fileRange{f: inF, n: size}, -1)
	if err != nil || !fallback || n != size/2 {
		t.Fatalf("first writer: copied %d of %d, fallback %v, %v; want half, then a short copy", n, size, fallback, err)
	}
	if during != 100 {
		t.Errorf("budget during the copy %d, want 100 (the whole length reserved first)", during)
	}
	if otherCopied != 0 {
		t.Errorf("the second writer copied %d bytes past the budget", otherCopied)
	}
	if got := budget.Load(); got != 100+size-size/2 {
		t.Errorf("budget after a short copy %d, want %d (the rest given back)", got, 100+size-size/2)
	}
	a.stop()
	b.stop()
}
