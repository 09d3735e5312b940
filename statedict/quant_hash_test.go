package statedict

import (
	"errors"
	"io"
	"testing"

	"github.com/ckpt-dev/ckpt/digest"
)

// TestQuantStreamDigest: a dequantized gpt-oss MXFP4 weight (1 MiB of
// bfloat16, 16 digest chunks) streamed after HashStream, by buffers of
// sizes that put read edges inside chunks, at chunk edges, and reads
// smaller than a chunk (the stream's window), has a digest equal to
// digest.SumBytes of its bytes (its chunk sums, by digest.ChunkSums,
// combined); a stream not asked, or one that stops
// short, has none (ErrNotHashed), and a plain stored tensor cannot be
// asked.
func TestQuantStreamDigest(t *testing.T) {
	ck, _, _ := mxfp4Fixture(t, 4, 256, 16, 13, nil)
	defer ck.Close()
	x := ck.Tensor("x")
	whole, err := x.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := digest.SumBytes(whole)
	xxh := ChunkHash{Size: digest.ChunkSize, Sums: digest.ChunkSums}
	streamDigest := func() (digest.Value, error) {
		sums, err := x.StreamChunkSums()
		if err != nil {
			return 0, err
		}
		return digest.Combine(int64(len(whole)), sums)
	}
	stream := func(buf int, stop int) error {
		rc, err := x.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b := make([]byte, buf)
		n := 0
		for stop < 0 || n < stop {
			k, err := io.ReadFull(rc, b)
			n += k
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				break
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	for _, buf := range []int{1 << 20, 3 << 20, 100003, 64 << 10, 200 << 10, 4093} {
		if !x.HashStream(xxh) {
			t.Fatal("a dequantized weight cannot hash its stream")
		}
		if err := stream(buf, -1); err != nil {
			t.Fatal(err)
		}
		got, err := streamDigest()
		if err != nil {
			t.Fatalf("buffers of %d: %v", buf, err)
		}
		if got != want {
			t.Errorf("buffers of %d: digest %s, want %s", buf, got, want)
		}
	}
	if err := stream(1<<20, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := streamDigest(); !errors.Is(err, ErrNotHashed) {
		t.Errorf("a stream not asked: %v, want ErrNotHashed", err)
	}
	x.HashStream(xxh)
	if err := stream(100003, 300000); err != nil {
		t.Fatal(err)
	}
	if _, err := streamDigest(); !errors.Is(err, ErrNotHashed) {
		t.Errorf("a stream stopped short: %v, want ErrNotHashed", err)
	}
	if ck.Tensor("plain").HashStream(xxh) {
		t.Error("a stored tensor says it hashes its stream")
	}
}
