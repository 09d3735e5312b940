package convert

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestAheadReader(t *testing.T) {
	data := make([]byte, 100_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for _, size := range []int{1, 7, 4096, 1 << 20} {
		a := newAheadReader(iotest.HalfReader(bytes.NewReader(data)), size)
		if err := iotest.TestReader(a, data); err != nil {
			t.Errorf("size %d: %v", size, err)
		}
		a.Close()
	}
	boom := errors.New("boom")
	a := newAheadReader(io.MultiReader(bytes.NewReader(data[:10]), iotest.ErrReader(boom)), 4)
	if b, err := io.ReadAll(a); !errors.Is(err, boom) || !bytes.Equal(b, data[:10]) {
		t.Errorf("error passthrough: %d bytes, %v", len(b), err)
	}
	a.Close()
	// Closing early stops the goroutine even with unread chunks.
	a = newAheadReader(bytes.NewReader(data), 16)
	a.Read(make([]byte, 3))
	a.Close()
	a.Close()
}
