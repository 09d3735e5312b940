package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/minio/minio-go/v7"
)

// objstoreGoroutines counts goroutines running objstore code.
func objstoreGoroutines() int {
	buf := make([]byte, 4<<20)
	n := runtime.Stack(buf, true)
	c := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "ckpt/objstore.") {
			c++
		}
	}
	return c
}

// The server stopped in the middle of convert and load from s3://: a
// clear one-line error, exit 1, no output, no temporary file, and no
// goroutine left reading.
func TestURLServerStoppedMidTransfer(t *testing.T) {
	s := miniotest.New(t)
	s.SetEnv(t)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	if err := s.MakeBucket("big"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "big.pt")
	bigCheckpoint(t, in, 96<<20)
	if _, err := s.Client.FPutObject(context.Background(), "big", "big.pt", in, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	os.Remove(in)
	// A proxy that stops the server at the first request for bytes
	// past 16 MiB: after the metadata, in the middle of the data
	// (however many requests the data takes: 8 MiB chunks, or the
	// 64 MiB GETs of a streamed tensor).
	target, _ := url.Parse(s.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	var once sync.Once
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var from int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-", &from); err == nil && from >= 16<<20 {
			once.Do(s.Kill)
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	t.Setenv("AWS_ENDPOINT_URL", proxy.URL)
	before := objstoreGoroutines()
	outDir := filepath.Join(dir, "out")
	os.Mkdir(outDir, 0o755)
	start := time.Now()
	code, out, errs := runCLI(t, "convert", "s3://big/big.pt", filepath.Join(outDir, "o.safetensors"))
	if code != exitError || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "s3://big/big.pt") {
		t.Fatalf("convert: exit %d, stdout %q, stderr %q; want exit 1 and one line naming the object", code, out, errs)
	}
	t.Logf("convert: %s after %v", strings.TrimSpace(errs), time.Since(start))
	if left, _ := os.ReadDir(outDir); len(left) != 0 {
		t.Fatalf("left in the output directory: %v", left)
	}
	code, _, errs = runCLI(t, "load", "--map-location", "cpu", "s3://big/big.pt")
	if code != exitError || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("load: exit %d, stderr %q", code, errs)
	}
	deadline := time.Now().Add(2 * time.Second)
	for objstoreGoroutines() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := objstoreGoroutines(); g > before {
		t.Fatalf("%d objstore goroutines left", g-before)
	}
}
