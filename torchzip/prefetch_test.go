package torchzip

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// slowReaderAt is an archive whose reads take a while, as a disk's or a
// network's do, and that counts its reads and the most at once.
type slowReaderAt struct {
	r              *bytes.Reader
	calls, now, hi atomic.Int64
}

func (s *slowReaderAt) ReadAt(p []byte, off int64) (int, error) {
	s.calls.Add(1)
	n := s.now.Add(1)
	for {
		h := s.hi.Load()
		if n <= h || s.hi.CompareAndSwap(h, n) {
			break
		}
	}
	time.Sleep(2 * time.Millisecond)
	s.now.Add(-1)
	return s.r.ReadAt(p, off)
}

// TestPrefetchSpans checks that PrefetchSpans reads the records' local
// headers several at once, that the spans it finds are those a reader
// finds one by one, and that Span and Data then read nothing.
func TestPrefetchSpans(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	const records = 64
	for i := range records {
		// 80 KiB apart: beyond the header window's reach.
		data := bytes.Repeat([]byte{byte(i)}, 80<<10+i)
		if err := w.WriteRecord(fmt.Sprintf("data/%d", i), int64(len(data)), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	size := int64(buf.Len())
	want := map[string]Span{}
	serial, err := NewReader(bytes.NewReader(buf.Bytes()), size)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range serial.Keys() {
		rec, _ := serial.Record(k)
		if want[k], err = rec.Span(); err != nil {
			t.Fatal(err)
		}
	}

	src := &slowReaderAt{r: bytes.NewReader(buf.Bytes())}
	z, err := NewReader(src, size)
	if err != nil {
		t.Fatal(err)
	}
	z.PrefetchSpans(context.Background(), "data/")
	if hi := src.hi.Load(); hi < 4 {
		t.Errorf("at most %d header reads at once, want several (up to %d)", hi, prefetchWorkers)
	}
	before := src.calls.Load()
	for _, k := range z.Keys() {
		rec, _ := z.Record(k)
		got, err := rec.Span()
		if err != nil {
			t.Fatal(err)
		}
		if k[:5] == "data/" && got != want[k] {
			t.Errorf("%s: prefetched span %+v, want %+v", k, got, want[k])
		}
		if k[:5] == "data/" {
			// Data's offset is the span's: no second read of the
			// header.
			sec, err := rec.Data()
			if err != nil {
				t.Fatal(err)
			}
			if _, off, _ := sec.Outer(); off != want[k].Begin {
				t.Errorf("%s: Data at %d, want %d", k, off, want[k].Begin)
			}
		}
	}
	if n := src.calls.Load() - before; n > 2 { // the records not under data/
		t.Errorf("%d reads after the prefetch, want none for data/ records", n)
	}
}
