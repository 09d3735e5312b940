package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"
)

// smallStreams makes ordered streams' GETs one chunk long and depth deep
// for the test.
func smallStreams(t *testing.T, get int64, depth int) {
	g, d := streamGetSize, streamDepth
	streamGetSize, streamDepth = get, depth
	t.Cleanup(func() { streamGetSize, streamDepth = g, d })
}

// readAllRandom reads r to its end with reads of random sizes.
func readAllRandom(r io.Reader, rng *rand.Rand) ([]byte, error) {
	var out []byte
	for {
		p := make([]byte, 1+rng.Intn(3<<20))
		n, err := r.Read(p)
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestStreamRange reads ranges with StreamRange, several GETs each (4 MiB
// chunks, one per GET, 3 in flight, 4 request slots), with reads of
// random sizes, and checks the bytes; each Read returns at most 1 MiB and
// stays within one GET. Reads after Close fail, and a cancelled context
// ends the stream with its error.
func TestStreamRange(t *testing.T) {
	smallStreams(t, 4<<20, 3)
	data := randomBytes(30<<20+12345, 9)
	obj := streamStore(t, data)
	rng := rand.New(rand.NewSource(1))
	for _, c := range []struct{ off, n int64 }{{0, int64(len(data))}, {9<<20 + 3, 13<<20 + 1}, {5, 100}, {int64(len(data)) - 7, 7}, {100, 0}} {
		r, err := obj.StreamRange(context.Background(), c.off, c.n)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAllRandom(r, rng)
		if err != nil {
			t.Fatalf("[%d, +%d): %v", c.off, c.n, err)
		}
		if !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Fatalf("[%d, +%d): wrong bytes (%d read)", c.off, c.n, len(got))
		}
		r.Close()
		if _, err := r.Read(make([]byte, 10)); err == nil || err == io.EOF {
			t.Fatalf("read after Close: %v", err)
		}
	}
	// Reads are at most 1 MiB and end at the GETs' ends (chunk
	// boundaries of the object).
	r, _ := obj.StreamRange(context.Background(), 3<<20+5, 8<<20)
	for pos := int64(3<<20 + 5); ; {
		n, err := r.Read(make([]byte, 3<<20))
		if err == io.EOF {
			break
		}
		if n > landedPiece || pos/(4<<20) != (pos+int64(n)-1)/(4<<20) {
			t.Fatalf("read of %d bytes at %d", n, pos)
		}
		pos += int64(n)
	}
	r.Close()
	if _, err := obj.StreamRange(context.Background(), 10, int64(len(data))); err == nil {
		t.Fatal("range past the end accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	r, _ = obj.StreamRange(ctx, 0, int64(len(data)))
	if _, err := r.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	cancel()
	var err error
	for err == nil {
		_, err = r.Read(make([]byte, 1<<20))
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	r.Close()
}

// Bodies cut short, dropped connections and throttling in an ordered
// stream are retried, the retry resuming where the reader is: the bytes
// come out whole, each once. One request slot only: the GETs ahead wait
// for it in order.
func TestStreamRangeRetries(t *testing.T) {
	smallStreams(t, 1<<20, 4)
	s, bucket := server(t)
	data := randomBytes(7<<20+333, 12)
	put(t, s, bucket, "k", data)
	faults := []string{"", "cut", "slowdown", "", "cut", "drop", "", "cut", "cut"}
	p := newFaultProxy(t, s.Endpoint, func(n int64, r *http.Request) string {
		if r.Method == http.MethodGet && int(n) <= len(faults) {
			return faults[n-1]
		}
		return ""
	})
	t.Setenv("AWS_ENDPOINT_URL", p.URL)
	for _, conc := range []int{1, 3} {
		p.n.Store(0)
		st, obj := openObject(t, "s3://"+bucket+"/k", WithChunkSize(1<<20), WithConcurrency(conc), WithRetries(5, time.Millisecond))
		r, err := obj.StreamRange(context.Background(), 1000, int64(len(data))-1000)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAllRandom(r, rand.New(rand.NewSource(2)))
		r.Close()
		if err != nil {
			t.Fatalf("concurrency %d: %v", conc, err)
		}
		if !bytes.Equal(got, data[1000:]) {
			t.Fatalf("concurrency %d: wrong bytes after retries (%d read)", conc, len(got))
		}
		if st.Requests() < int64(len(faults)) {
			t.Fatalf("%d requests: the faults were not met", st.Requests())
		}
	}
	// A request refused for good ends the stream with its error.
	p.fault = func(n int64, r *http.Request) string {
		if r.Method == http.MethodGet && strings.Contains(r.Header.Get("Range"), "bytes=3145728") {
			return "forbid"
		}
		return ""
	}
	_, obj := openObject(t, "s3://"+bucket+"/k", WithChunkSize(1<<20), WithRetries(2, time.Millisecond))
	r, _ := obj.StreamRange(context.Background(), 0, int64(len(data)))
	got, err := readAllRandom(r, rand.New(rand.NewSource(3)))
	r.Close()
	var oe *Error
	if !errors.As(err, &oe) || len(got) != 3<<20 || !bytes.Equal(got, data[:3<<20]) {
		t.Fatalf("refused GET: %d bytes read, error %v", len(got), err)
	}
}
