package miniotest

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestServerRoundTrip(t *testing.T) {
	s := New(t)
	if err := s.MakeBucket("bkt"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Client.PutObject(ctx, "bkt", "k", bytes.NewReader([]byte("hello")), 5, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	o, err := s.Client.GetObject(ctx, "bkt", "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(o)
	if err != nil || string(b) != "hello" {
		t.Fatalf("got %q, %v", b, err)
	}
	s.Stop()
	if _, err := s.Client.BucketExists(ctx, "bkt"); err == nil {
		t.Fatal("server still answers after Stop")
	}
}
