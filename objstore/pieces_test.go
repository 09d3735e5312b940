package objstore

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestReadAtPieces checks what Object.ReadAtPieces promises
// (statedict.PieceReaderAt) over MinIO, through a proxy that cuts some
// bodies short so that their requests are retried: every piece is
// reported with the object's bytes at its offset, pieces start every MiB
// from the start of their request, and together they cover the read.
func TestReadAtPieces(t *testing.T) {
	s, bucket := server(t)
	data := randomBytes(9<<20+777, 11)
	put(t, s, bucket, "k", data)
	var rmu sync.Mutex
	var ranges []string
	p := newFaultProxy(t, s.Endpoint, func(n int64, r *http.Request) string {
		rmu.Lock()
		ranges = append(ranges, r.Header.Get("Range"))
		rmu.Unlock()
		if n == 3 || n == 5 {
			return "cut"
		}
		return ""
	})
	t.Setenv("AWS_ENDPOINT_URL", p.URL)
	const chunk, direct = 1 << 20, 3<<20 + 5
	_, obj := openObject(t, "s3://"+bucket+"/k", WithChunkSize(chunk), WithDirectGetSize(direct), WithRetries(5, time.Millisecond))

	const off = 12345
	got := make([]byte, len(data)-off-100)
	var mu sync.Mutex
	covered := make([]int, len(got))
	pieces := 0
	n, err := obj.ReadAtPieces(got, off, func(piece []byte, at int64) {
		mu.Lock()
		defer mu.Unlock()
		pieces++
		if !bytes.Equal(piece, data[at:at+int64(len(piece))]) {
			t.Errorf("piece at %d (%d bytes): not the object's bytes", at, len(piece))
		}
		if (at-off)%landedPiece != 0 && at%landedPiece != 0 {
			t.Errorf("piece at %d: not at a MiB from the start of a request", at)
		}
		for i := at - off; i < at-off+int64(len(piece)); i++ {
			covered[i]++
		}
	})
	if err != nil || n != len(got) {
		t.Fatalf("ReadAtPieces: %d, %v", n, err)
	}
	if !bytes.Equal(got, data[off:off+len(got)]) {
		t.Fatal("wrong bytes")
	}
	for i, c := range covered {
		if c == 0 {
			t.Fatalf("byte %d of the read was in no piece", i)
		}
	}
	// The first request (Open) reads the head; the read's first GET starts
	// at off, every other at a multiple of the chunk size; each is at most
	// the direct GET size rounded down to chunks (3 MiB) and ends at a
	// chunk boundary or the read's end.
	longest := int64(0)
	for _, r := range ranges[1:] {
		var lo, hi int64
		if _, err := fmt.Sscanf(r, "bytes=%d-%d", &lo, &hi); err != nil {
			t.Fatalf("range %q: %v", r, err)
		}
		longest = max(longest, hi-lo+1)
		if lo != off && lo%chunk != 0 || hi-lo+1 > 3*chunk || (hi+1)%chunk != 0 && hi+1 != off+int64(len(got)) {
			t.Errorf("GET of bytes %d-%d: not within 3 chunks from a chunk boundary to a chunk boundary", lo, hi)
		}
	}
	if longest != 3*chunk {
		t.Errorf("longest GET %d bytes, want %d", longest, 3*chunk)
	}
	if p.n.Load() < 5 {
		t.Fatalf("%d requests: the cut bodies were not met", p.n.Load())
	}
	if want := (len(got) + landedPiece - 1) / landedPiece; pieces <= want {
		t.Errorf("%d pieces for %d bytes: no piece of a cut request was reported again", pieces, len(got))
	}

	// A read smaller than the chunk size is reported whole.
	small := make([]byte, 1000)
	var whole [][2]int64
	if _, err := obj.ReadAtPieces(small, 5000, func(piece []byte, at int64) {
		whole = append(whole, [2]int64{at, int64(len(piece))})
	}); err != nil {
		t.Fatal(err)
	}
	if len(whole) != 1 || whole[0] != [2]int64{5000, 1000} || !bytes.Equal(small, data[5000:6000]) {
		t.Errorf("small read: pieces %v", whole)
	}
}
