package objstore

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"testing"

	"github.com/ckpt-dev/ckpt/internal/miniotest"
	"github.com/minio/minio-go/v7"
)

// srv is the MinIO server the package's tests share (nil when there is
// no binary; the tests that need it skip, or fail under
// CKPT_REQUIRE_MINIO=1).
var srv *miniotest.Server

func TestMain(m *testing.M) {
	flag.Parse()
	// Tests touch loopback only: no instance-metadata lookups for a role.
	os.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	// Fuzzing needs no server (and each fuzz worker runs TestMain).
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" || flag.Lookup("test.run").Value.String() == "^$" {
		os.Exit(m.Run())
	}
	s, err := miniotest.Start()
	if err != nil && (miniotest.Required() || err != miniotest.ErrNoBinary) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	stopEmulators()
	os.Exit(code)
}

// server returns the shared server with the standard AWS environment
// pointing at it, and a fresh bucket.
func server(t *testing.T) (*miniotest.Server, string) {
	t.Helper()
	if srv == nil {
		t.Skip(miniotest.ErrNoBinary.Error())
	}
	srv.SetEnv(t)
	bucket := fmt.Sprintf("b%d", rand.Int63())
	if err := srv.MakeBucket(bucket); err != nil {
		t.Fatal(err)
	}
	return srv, bucket
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func put(t *testing.T, s *miniotest.Server, bucket, key string, data []byte) {
	t.Helper()
	if _, err := s.Client.PutObject(context.Background(), bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
}
