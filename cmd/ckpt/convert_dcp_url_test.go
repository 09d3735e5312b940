package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

// TestConvertDCPToS3Command: convert --to dcp to an s3:// prefix (MinIO),
// in one process and as two --part processes (torchrun's environment for
// part 0), gives the same objects, which inspect reads from there; part 0
// alone fails (exit 1) after --part-wait, naming the missing object and
// leaving no .metadata.
func TestConvertDCPToS3Command(t *testing.T) {
	s := sharedMinio(t)
	bucket := fmt.Sprintf("dcp%d", rand.Int63())
	if err := s.MakeBucket(bucket); err != nil {
		t.Fatal(err)
	}
	one, parts := "s3://"+bucket+"/one/", "s3://"+bucket+"/parts/"
	args := []string{"--to", "dcp", "--dcp-ranks", "2", "--split", "*=0"}
	if out, code, errs := cli(append([]string{"convert", cudaTagged, one}, args...)...); code != exitOK {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	_, code, errs := cli(append([]string{"convert", cudaTagged, parts, "--part", "1/2"}, args...)...)
	if code != exitOK || !strings.Contains(errs, "part 1 of 2 (--part 1/2)") {
		t.Fatalf("part 1: exit %d, %q", code, errs)
	}
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "2")
	_, code, errs = cli(append([]string{"convert", cudaTagged, parts, "--part", "auto", "--part-wait", "1m"}, args...)...)
	if code != exitOK || !strings.Contains(errs, "part 0 of 2 (torchrun: RANK=0 WORLD_SIZE=2)") {
		t.Fatalf("part 0: exit %d, %q", code, errs)
	}
	get := func(key string) ([]byte, error) {
		o, err := s.Client.GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
		if err != nil {
			return nil, err
		}
		defer o.Close()
		return io.ReadAll(o)
	}
	for _, name := range []string{".metadata", "__0_0.distcp", "__1_0.distcp"} {
		a, err1 := get("one/" + name)
		b, err2 := get("parts/" + name)
		if err1 != nil || err2 != nil || len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s differs between one process and two parts (%v, %v)", name, err1, err2)
		}
	}
	out, code, errs := cli("inspect", parts)
	if code != exitOK || !strings.Contains(out, "dcp") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errs)
	}
	missing := "s3://" + bucket + "/missing/"
	_, code, errs = cli(append([]string{"convert", cudaTagged, missing, "--part", "0/2", "--part-wait", "200ms"}, args...)...)
	if code != exitError || !strings.Contains(errs, "another part's output is missing: "+missing+"__1_0.distcp") {
		t.Fatalf("part 0 alone: exit %d, %q", code, errs)
	}
	for o := range s.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: "missing/", Recursive: true}) {
		t.Errorf("left behind: %s (%v)", o.Key, o.Err)
	}
}
