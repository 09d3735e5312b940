package torchzip

import (
	"bytes"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

type countingReaderAt struct {
	r     *bytes.Reader
	calls atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	return c.r.ReadAt(p, off)
}

// TestHeaderWindow: every read through the window gives what the archive
// itself gives (bytes, count, and io.EOF at the end); small reads close
// together cost one read of the archive per window once it has grown to
// 64 KiB (from 512 bytes: 8 reads), and small reads far apart read 512
// bytes each, not a window.
func TestHeaderWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 300_001)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	src := &countingReaderAt{r: bytes.NewReader(data)}
	w := &headerWindow{r: src, size: int64(len(data))}
	for i := range 20000 {
		n := rng.IntN(600)
		off := rng.Int64N(int64(len(data)) + 100)
		if i%3 == 0 {
			off = int64(len(data)) - rng.Int64N(700) // around the end
		}
		got, want := make([]byte, n), make([]byte, n)
		gn, gerr := w.ReadAt(got, off)
		wn, werr := bytes.NewReader(data).ReadAt(want, off)
		if gn != wn || !bytes.Equal(got[:gn], want[:wn]) || (gerr == nil) != (werr == nil) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; want %d, %v", n, off, gn, gerr, wn, werr)
		}
	}
	src.calls.Store(0)
	w = &headerWindow{r: src, size: int64(len(data))}
	for off := int64(0); off+30 <= int64(len(data)); off += 46 { // a 30-byte header every 46 bytes
		if _, err := w.ReadAt(make([]byte, 30), off); err != nil {
			t.Fatal(err)
		}
	}
	if c, most := src.calls.Load(), int64(len(data)/headerWindowSize+10); c > most {
		t.Errorf("%d reads of the archive for %d headers, want at most %d", c, len(data)/46, most)
	}
	var read atomic.Int64
	far := &headerWindow{r: readerAtFunc(func(p []byte, off int64) (int, error) {
		read.Add(int64(len(p)))
		return bytes.NewReader(data).ReadAt(p, off)
	}), size: int64(len(data))}
	for off := int64(0); off+30 <= int64(len(data)); off += 100_000 { // headers of 100 kB records
		if _, err := far.ReadAt(make([]byte, 30), off); err != nil {
			t.Fatal(err)
		}
	}
	if n := read.Load(); n > 4*smallRead {
		t.Errorf("%d bytes read for 3 headers 100 kB apart", n)
	}
}

type readerAtFunc func(p []byte, off int64) (int, error)

func (f readerAtFunc) ReadAt(p []byte, off int64) (int, error) { return f(p, off) }
