package objstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"
)

// memBackend serves an object from memory, for the reader's fuzz target.
type memBackend struct{ data []byte }

func (m *memBackend) url(key string) string { return "mem://" + key }
func (m *memBackend) list(context.Context, string) ([]string, error) {
	return nil, nil
}
func (m *memBackend) get(ctx context.Context, _ string, off int64, dst dest, ver version) (int, int64, version, error) {
	if off >= int64(len(m.data)) {
		return 0, int64(len(m.data)), version{etag: "e"}, nil
	}
	n, err := readBody(ctx, bytes.NewReader(m.data[off:]), dst, int64(len(m.data))-off)
	if err == io.ErrUnexpectedEOF {
		err = nil // fewer bytes only at the object's end
	}
	return n, int64(len(m.data)), version{etag: "e"}, err
}

func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-4/10", "bytes */0", "bytes 0-9/9", "", "bytes -1-3/5", "bytes 0-18446744073709551615/1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		start, end, size, ok := parseContentRange(h)
		if ok && !(start >= 0 && start <= end && end < size) {
			t.Fatalf("%q: accepted %d-%d/%d", h, start, end, size)
		}
	})
}

// FuzzObjectReads runs read sequences (offset, length pairs, some from
// several goroutines) through an Object over an in-memory object with
// small chunks and windows, and compares every byte.
func FuzzObjectReads(f *testing.F) {
	f.Add(uint16(5000), []byte{0, 0, 0, 10, 0, 100, 0, 200, 1, 0, 0, 50})
	f.Add(uint16(100), []byte{0, 0, 0, 99, 0, 99, 0, 5})
	f.Add(uint16(0), []byte{0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, size uint16, ops []byte) {
		data := randomBytes(int(size), int64(size))
		s := &Store{ctx: context.Background(), cfg: defaultConfig(), b: &memBackend{data}}
		s.cfg.chunk, s.cfg.window, s.cfg.readAhead = 512, 128, 3
		s.sem = make(chan struct{}, 2)
		obj, err := s.Open("k")
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		for len(ops) >= 4 {
			off := int64(binary.BigEndian.Uint16(ops))
			n := int(binary.BigEndian.Uint16(ops[2:]) % 2048)
			ops = ops[4:]
			buf := make([]byte, n)
			k, err := obj.ReadAt(buf, off)
			want := max(0, min(int64(n), int64(size)-off))
			if int64(k) != want || (err != nil && err != io.EOF) {
				t.Fatalf("ReadAt(%d, %d) = %d, %v; want %d", n, off, k, err, want)
			}
			if k > 0 && !bytes.Equal(buf[:k], data[off:off+int64(k)]) {
				t.Fatalf("ReadAt(%d, %d): wrong bytes", n, off)
			}
			if obj.cachedBytes() > obj.limit+512 {
				t.Fatalf("cache %d over its limit %d", obj.cachedBytes(), obj.limit)
			}
		}
	})
}
