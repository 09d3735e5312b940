package objstore

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
)

// streamStore is a Store over an in-memory object with 4 MiB chunks and
// GETs of up to 8 MiB.
func streamStore(t *testing.T, data []byte) *Object {
	t.Helper()
	s := &Store{ctx: context.Background(), cfg: defaultConfig(), b: &memBackend{data}}
	s.cfg.chunk, s.cfg.directGet = 4<<20, 8<<20
	s.sem = make(chan struct{}, 4)
	obj, err := s.Open("k")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obj.Close() })
	return obj
}

// TestReadAtStream reads ranges with ReadAtStream and checks that the
// pieces cover the range exactly once with the object's bytes, that each
// is at most 1 MiB and ends at a multiple of 1 MiB from the origin or at a
// GET's end (a chunk boundary of the object, or the range's end), that the
// buffers are reused (a handful, not one per piece), and that a sink's
// error and a cancelled context end the read and come back as they are.
func TestReadAtStream(t *testing.T) {
	data := randomBytes(30<<20+12345, 5)
	obj := streamStore(t, data)
	for _, c := range []struct{ origin, off, n int64 }{
		{0, 0, int64(len(data))},
		{1000, 1000, 20 << 20},
		{777, 9<<20 + 3, 13<<20 + 1},
		{5, 5, 100},
	} {
		var mu sync.Mutex
		got := make([]byte, c.n)
		seen := make([]bool, c.n)
		bufs := map[*byte]bool{}
		err := obj.ReadAtStream(context.Background(), c.origin, c.off, c.n, func(piece []byte, at int64) error {
			mu.Lock()
			defer mu.Unlock()
			rel := at - (c.off - c.origin) // offset in the range
			end := at + int64(len(piece))
			atGetEnd := (c.origin+end)%(4<<20) == 0 || rel+int64(len(piece)) == c.n
			if len(piece) > 1<<20 || (end%(1<<20) != 0 && !atGetEnd) {
				t.Errorf("range %+v: piece [%d, %d) from the origin", c, at, end)
			}
			copy(got[rel:], piece)
			for i := range piece {
				if seen[rel+int64(i)] {
					t.Fatalf("range %+v: byte %d handed twice", c, rel+int64(i))
				}
				seen[rel+int64(i)] = true
			}
			bufs[&piece[:1][0]] = true
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Fatalf("range %+v: wrong bytes", c)
		}
		if c.n > 8<<20 && len(bufs) > 12 {
			t.Errorf("range %+v: %d buffers", c, len(bufs))
		}
	}

	errSink := errors.New("sink full")
	err := obj.ReadAtStream(context.Background(), 0, 0, 10<<20, func([]byte, int64) error { return errSink })
	if err != errSink {
		t.Errorf("sink error: got %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err = obj.ReadAtStream(ctx, 0, 0, 10<<20, func([]byte, int64) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v", err)
	}
	if err := obj.ReadAtStream(context.Background(), 0, 10, int64(len(data)), func([]byte, int64) error { return nil }); err == nil {
		t.Error("a range past the object's end was read")
	}
}
