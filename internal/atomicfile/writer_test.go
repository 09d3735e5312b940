package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// writeThrough writes data to a fresh file with a fileWriter, in random
// pieces through Write, or through ReadFrom, and returns the file's
// bytes.
func writeThrough(t *testing.T, data []byte, readFrom bool, setup func(*Writer)) ([]byte, error) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := newWriter(f, nil)
	if setup != nil {
		if w.direct != nil {
			w.direct.Close()
		}
		setup(w)
	}
	if readFrom {
		// A reader that hands out odd-sized pieces, as a cast or a
		// LimitReader does.
		r := &choppy{data: data, rng: rand.New(rand.NewPCG(1, 2))}
		if _, err := w.ReadFrom(r); err != nil {
			w.stop()
			return nil, err
		}
	} else {
		rng := rand.New(rand.NewPCG(3, 4))
		for p := data; len(p) > 0; {
			k := min(len(p), 1+rng.IntN(3*outputBlock/2))
			if _, err := w.Write(p[:k]); err != nil {
				w.stop()
				return nil, err
			}
			p = p[k:]
		}
	}
	if err := w.finish(); err != nil {
		return nil, err
	}
	if w.buf != nil || len(w.free) != 0 {
		t.Fatalf("finish kept buffers: %d free, current %v", len(w.free), w.buf != nil)
	}
	if _, err := w.Write([]byte{1}); err != errFinished {
		t.Fatalf("write after finish: %v", err)
	}
	return os.ReadFile(f.Name())
}

type choppy struct {
	data []byte
	rng  *rand.Rand
}

func (c *choppy) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), len(c.data), 1+c.rng.IntN(100000))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

// TestFileWriterBytes checks that every size, through both entry points,
// direct or not, lands in the file byte for byte.
func TestFileWriterBytes(t *testing.T) {
	sizes := []int{0, 1, directAlign - 1, directAlign, directAlign + 1, outputBlock - 1, outputBlock, outputBlock + 1, 3*outputBlock + directAlign + 17}
	data := make([]byte, sizes[len(sizes)-1])
	fill(data, 5)
	for _, buffered := range []bool{false, true} {
		for _, readFrom := range []bool{false, true} {
			for _, n := range sizes {
				forceBuffered = buffered
				got, err := writeThrough(t, data[:n], readFrom, nil)
				forceBuffered = false
				if err != nil {
					t.Fatalf("buffered=%v readFrom=%v size %d: %v", buffered, readFrom, n, err)
				}
				if !bytes.Equal(got, data[:n]) {
					t.Fatalf("buffered=%v readFrom=%v size %d: file differs (%d bytes)", buffered, readFrom, n, len(got))
				}
			}
		}
	}
}

// refusing is a direct handle that fails every write with err, after
// letting ok writes through to f.
type refusing struct {
	f   *os.File
	ok  int
	err error
}

func (r *refusing) WriteAt(p []byte, off int64) (int, error) {
	if r.ok > 0 {
		r.ok--
		return r.f.WriteAt(p, off)
	}
	return 0, r.err
}

func (r *refusing) Close() error { return nil }

// TestFileWriterBuffersOnce: after finish, the pool holds each buffer
// once (a buffer handed out twice would be written by two outputs).
func TestFileWriterBuffersOnce(t *testing.T) {
	for _, n := range []int{0, 100, directAlign, outputBlock + directAlign + 3} {
		f, err := os.Create(filepath.Join(t.TempDir(), "out"))
		if err != nil {
			t.Fatal(err)
		}
		w := newWriter(f, nil)
		if _, err := w.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var got []*byte
		for range outputBuffers + 1 {
			b := *blocks.Get(outputBlock)
			got = append(got, &b[:1][0])
		}
		dup := map[*byte]int{}
		for _, p := range got {
			dup[p]++
			if dup[p] > 1 {
				t.Fatalf("size %d: the pool handed out one buffer twice", n)
			}
		}
	}
}

// TestFileWriterFallback: a filesystem that turns direct I/O down at
// write time (EINVAL) gets the same bytes through ordinary writes.
func TestFileWriterFallback(t *testing.T) {
	data := make([]byte, 4*outputBlock+123)
	fill(data, 7)
	got, err := writeThrough(t, data, false, func(w *Writer) {
		w.direct = &refusing{f: w.f, ok: 1, err: &os.PathError{Op: "write", Path: "out", Err: syscall.EINVAL}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("file differs after falling back to ordinary writes")
	}
}

// TestFileWriterError: any other write error comes back from Write or
// finish, and nothing hangs.
func TestFileWriterError(t *testing.T) {
	data := make([]byte, 5*outputBlock)
	for _, readFrom := range []bool{false, true} {
		_, err := writeThrough(t, data, readFrom, func(w *Writer) {
			w.direct = &refusing{f: w.f, ok: 1, err: &os.PathError{Op: "write", Path: "out", Err: syscall.ENOSPC}}
		})
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("readFrom=%v: got %v, want ENOSPC", readFrom, err)
		}
	}
}

// fill fills b with pseudo-random bytes from seed.
func fill(b []byte, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// TestWriterTakesBuffersAsNeeded: a writer takes output buffers only as
// it fills them: one for a small file (a header before in-kernel copies),
// never more than outputBuffers for a large one, and the bytes are right.
func TestWriterTakesBuffersAsNeeded(t *testing.T) {
	blk := cachedBlock // writing behind: everything through the page cache
	for _, tc := range []struct{ n, most int }{{100, 1}, {blk + 1, 2}, {5*blk + 7, outputBuffers}, {5*outputBlock + 7, outputBuffers}} {
		f, err := os.CreateTemp(t.TempDir(), "w")
		if err != nil {
			t.Fatal(err)
		}
		w := newWriter(f, nil)
		if cap(w.buf) != blk {
			t.Fatalf("a writer that writes behind took a buffer of %d bytes, want %d", cap(w.buf), blk)
		}
		data := make([]byte, tc.n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		made := w.made
		if err := w.finish(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(f.Name())
		f.Close()
		if made < 1 || made > tc.most {
			t.Errorf("%d bytes: took %d buffers, want 1..%d", tc.n, made, tc.most)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%d bytes: file differs", tc.n)
		}
	}
}
