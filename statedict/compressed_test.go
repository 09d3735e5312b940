package statedict

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// zstdOf compresses head followed by n zero bytes.
func zstdOf(t *testing.T, head []byte, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	enc.Write(head)
	if _, err := io.CopyN(enc, zeros{}, n); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestCompressedSniffedFirst: decompressed content that does not begin a
// checkpoint is refused from its first bytes, before any is spooled (the
// limit here would be hit first otherwise).
func TestCompressedSniffedFirst(t *testing.T) {
	b := zstdOf(t, nil, 64<<20)
	_, err := NewReader(bytes.NewReader(b), int64(len(b)), WithTempDir(t.TempDir()), WithMaxDecompressedSize(1<<20))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "decompressed content is not a checkpoint") {
		t.Fatalf("err %v, want ErrFormat from the first bytes", err)
	}
}

// TestCompressedDefaultLimit: by default a compressed file may expand to a
// small multiple of its size (at least 64 MiB), not 1 TiB; the option
// raises the limit.
func TestCompressedDefaultLimit(t *testing.T) {
	b := zstdOf(t, zipMagic, 100<<20) // a few KB
	if got := defaultMaxDecompressed(int64(len(b)), t.TempDir()); got != minDecompressLimit {
		t.Errorf("default limit for %d bytes: %d", len(b), got)
	}
	_, err := NewReader(bytes.NewReader(b), int64(len(b)), WithTempDir(t.TempDir()))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "decompresses to more than 67108864 bytes") || !strings.Contains(err.Error(), "WithMaxDecompressedSize") {
		t.Fatalf("default limit: %v", err)
	}
	_, err = NewReader(bytes.NewReader(b), int64(len(b)), WithTempDir(t.TempDir()), WithMaxDecompressedSize(128<<20))
	if err == nil || strings.Contains(err.Error(), "decompresses to more than") {
		t.Fatalf("raised limit: %v, want the zip's own error", err)
	}
	if got := defaultMaxDecompressed(1<<30, t.TempDir()); got > 64<<30 {
		t.Errorf("default limit for 1 GiB: %d", got)
	}
}

// TestCompressedCancel: decompression spooling stops when the context is
// done.
func TestCompressedCancel(t *testing.T) {
	b := zstdOf(t, zipMagic, 32<<20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewReader(bytes.NewReader(b), int64(len(b)), WithTempDir(t.TempDir()), WithContext(ctx))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

// TestOpenCancel: opening stops at once when the context is done: the zip
// directory walk, the tar walk, the shard loop.
func TestOpenCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, p := range []string{"training.pt", "tar.pt", "sharded_st"} {
		if _, err := Open("../testdata/fixtures/"+p, WithContext(ctx)); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", p, err)
		}
		ck, err := Open("../testdata/fixtures/"+p, WithContext(context.Background()))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else {
			ck.Close()
		}
	}
}
