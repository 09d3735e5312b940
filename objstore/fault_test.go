package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// faultProxy sits between the client and MinIO and, for the requests
// that fault picks, answers 503 SlowDown, drops the connection, cuts the
// body short or delays.
type faultProxy struct {
	*httptest.Server
	n     atomic.Int64
	fault func(n int64, r *http.Request) string // "", "slowdown", "drop", "cut", "delay", "stall", "forbid"
}

func newFaultProxy(t *testing.T, target string, fault func(n int64, r *http.Request) string) *faultProxy {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &faultProxy{fault: fault}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.n.Add(1)
		switch p.fault(n, r) {
		case "slowdown":
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`)
			return
		case "forbid":
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>`)
			return
		case "drop":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case "cut":
			// Forward, but send only part of the body, then drop.
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			body := rec.Body.Bytes()
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case "delay":
			time.Sleep(300 * time.Millisecond)
		case "stall":
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

// Throttling (503 SlowDown), dropped connections, bodies cut short and
// slow answers are retried with backoff, and the read succeeds.
func TestS3RetriesThroughFaults(t *testing.T) {
	s, bucket := server(t)
	data := randomBytes(6<<20, 4)
	put(t, s, bucket, "k", data)
	faults := []string{"slowdown", "drop", "", "cut", "slowdown", "delay", "", "drop", "cut"}
	p := newFaultProxy(t, s.Endpoint, func(n int64, r *http.Request) string {
		if int(n) <= len(faults) {
			return faults[n-1]
		}
		return ""
	})
	t.Setenv("AWS_ENDPOINT_URL", p.URL)
	st, obj := openObject(t, "s3://"+bucket+"/k", WithChunkSize(1<<20), WithDirectGetSize(1<<20), WithConcurrency(1), WithRetries(5, time.Millisecond))
	got := make([]byte, len(data))
	if _, err := obj.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("wrong bytes after retries")
	}
	if st.Requests() < int64(len(faults)) {
		t.Fatalf("%d requests: the faults were not met", st.Requests())
	}
}

// Retries stop: persistent throttling ends in a clear error.
func TestS3RetriesGiveUp(t *testing.T) {
	s, bucket := server(t)
	put(t, s, bucket, "k", []byte("x"))
	p := newFaultProxy(t, s.Endpoint, func(int64, *http.Request) string { return "slowdown" })
	t.Setenv("AWS_ENDPOINT_URL", p.URL)
	st, key, _ := NewStore(context.Background(), "s3://"+bucket+"/k", WithRetries(3, time.Millisecond))
	_, err := st.Open(key)
	if err == nil || !strings.Contains(err.Error(), "SlowDown") || st.Requests() != 4 {
		t.Fatalf("got %v after %d requests, want SlowDown after 4", err, st.Requests())
	}
}

// Ctrl-C: cancelling the Store's context stops in-flight reads.
func TestS3Cancel(t *testing.T) {
	s, bucket := server(t)
	put(t, s, bucket, "k", randomBytes(4<<20, 5))
	p := newFaultProxy(t, s.Endpoint, func(n int64, r *http.Request) string {
		if n > 1 {
			return "stall"
		}
		return ""
	})
	t.Setenv("AWS_ENDPOINT_URL", p.URL)
	before, _ := objstoreGoroutines()
	ctx, cancel := context.WithCancel(context.Background())
	st, key, _ := NewStore(ctx, "s3://"+bucket+"/k", WithChunkSize(1<<20))
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err = obj.ReadAt(make([]byte, 3<<20), 1<<20)
	// The server stalls for 5 s: returning well before shows the
	// requests were cancelled, not waited for.
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("got %v after %v, want a prompt context.Canceled", err, time.Since(start))
	}
	obj.Close()
	noGoroutinesLeft(t, before)
}

func pendingUploads(t *testing.T, bucket string) int {
	n := 0
	for u := range srv.Client.ListIncompleteUploads(context.Background(), bucket, "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		n++
	}
	return n
}

// An upload left pending by a killed convert (nothing could abort it) is
// aborted by the next upload of the same key; another key's is left.
func TestS3UploadAbortsStale(t *testing.T) {
	_, bucket := server(t)
	ctx := context.Background()
	core := &minio.Core{Client: srv.Client}
	for _, k := range []string{"stale/f.bin", "stale/other.bin"} {
		if _, err := core.NewMultipartUpload(ctx, bucket, k, minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := pendingUploads(t, bucket); n != 2 {
		t.Fatalf("%d pending uploads, want 2", n)
	}
	src := t.TempDir() + "/f"
	writeFile(t, src, randomBytes(1<<20, 7))
	st, key, err := NewStore(ctx, "s3://"+bucket+"/stale/f.bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Upload(ctx, src, key); err != nil {
		t.Fatal(err)
	}
	var left []string
	for u := range srv.Client.ListIncompleteUploads(ctx, bucket, "", true) {
		left = append(left, u.Key)
	}
	if len(left) != 1 || left[0] != "stale/other.bin" {
		t.Fatalf("pending after the upload: %v, want only stale/other.bin", left)
	}
	for u := range srv.Client.ListIncompleteUploads(ctx, bucket, "stale/other.bin", false) {
		core.AbortMultipartUpload(ctx, bucket, u.Key, u.UploadID)
	}
}

func TestS3Upload(t *testing.T) {
	_, bucket := server(t)
	data := randomBytes(12<<20+5, 6)
	src := t.TempDir() + "/f"
	writeFile(t, src, data)
	st, key, _ := NewStore(context.Background(), "s3://"+bucket+"/out/f.bin", WithPartSize(5<<20))
	if err := st.Upload(context.Background(), src, key); err != nil {
		t.Fatal(err)
	}
	o, err := srv.Client.GetObject(context.Background(), bucket, "out/f.bin", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("uploaded object differs: %v", err)
	}
	if n := pendingUploads(t, bucket); n != 0 {
		t.Fatalf("%d pending uploads", n)
	}
}

// A part that fails aborts the upload: no object, no pending upload.
func TestS3UploadAborts(t *testing.T) {
	s, bucket := server(t)
	var parts atomic.Int64
	p := newFaultProxy(t, s.Endpoint, func(n int64, r *http.Request) string {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") != "" && parts.Add(1) == 2 {
			return "forbid"
		}
		return ""
	})
	t.Setenv("AWS_ENDPOINT_URL", p.URL)
	src := t.TempDir() + "/f"
	writeFile(t, src, randomBytes(16<<20, 6))
	st, key, _ := NewStore(context.Background(), "s3://"+bucket+"/f.bin", WithPartSize(5<<20), WithConcurrency(1))
	err := st.Upload(context.Background(), src, key)
	if !errors.Is(err, ErrAccessDenied) {
		t.Fatalf("got %v, want access denied", err)
	}
	if n := pendingUploads(t, bucket); n != 0 {
		t.Fatalf("%d pending uploads after a failed upload", n)
	}
	if ok, err := st.Exists(context.Background(), key); ok || err != nil {
		t.Fatalf("the object exists after a failed upload (%v)", err)
	}
	// Cancelled mid-upload: aborted too.
	ctx, cancel := context.WithCancel(context.Background())
	p.fault = func(n int64, r *http.Request) string {
		if r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2" {
			cancel()
			return "delay"
		}
		return ""
	}
	st, key, _ = NewStore(ctx, "s3://"+bucket+"/f.bin", WithPartSize(5<<20), WithConcurrency(1))
	err = st.Upload(ctx, src, key)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := pendingUploads(t, bucket); n != 0 {
		t.Fatalf("%d pending uploads after a cancelled upload", n)
	}
	st, key, _ = NewStore(context.Background(), "s3://"+bucket+"/f.bin")
	if ok, err := st.Exists(context.Background(), key); ok || err != nil {
		t.Fatalf("the object exists after a cancelled upload (%v)", err)
	}
}
