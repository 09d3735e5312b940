package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func objectKeys(t *testing.T, bucket string) []string {
	t.Helper()
	var keys []string
	for o := range minioSrv.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

func pendingUploads(t *testing.T, bucket string) int {
	t.Helper()
	n := 0
	for u := range minioSrv.Client.ListIncompleteUploads(context.Background(), bucket, "", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		n++
	}
	return n
}

// convert to s3://: a single file and a sharded output, read back from the
// bucket; an existing object needs --force.
func TestConvertToS3(t *testing.T) {
	s := sharedMinio(t)
	if err := s.MakeBucket("out1"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "convert", "--json", fx+"training.pt", "s3://out1/run/model.safetensors")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep convertReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || rep.Files[0] != "s3://out1/run/model.safetensors" {
		t.Fatalf("files %v", rep.Files)
	}
	code, out, errs = runCLI(t, "verify", fx+"training.pt", "s3://out1/run/model.safetensors")
	if code != exitOK || !strings.Contains(out, "OK") {
		t.Fatalf("verify against the source: %d %s %s", code, out, errs)
	}
	code, _, errs = runCLI(t, "convert", fx+"training.pt", "s3://out1/run/model.safetensors")
	if code != exitError || !strings.Contains(errs, "--force") {
		t.Fatalf("existing object: exit %d %s", code, errs)
	}
	if code, _, errs = runCLI(t, "convert", "--force", fx+"training.pt", "s3://out1/run/model.safetensors"); code != exitOK {
		t.Fatalf("--force: exit %d %s", code, errs)
	}
	// Sharded, into a "directory", from the bucket itself.
	code, out, errs = runCLI(t, "convert", "--json", "--max-shard-size", "100B", "s3://fxb/training.pt", "s3://out1/sharded/")
	if code != exitOK {
		t.Fatalf("sharded: exit %d: %s", code, errs)
	}
	rep = convertReport{}
	json.Unmarshal([]byte(out), &rep)
	if len(rep.Files) < 2 || rep.Index != "s3://out1/sharded/model.safetensors.index.json" {
		t.Fatalf("sharded: files %v index %q", rep.Files, rep.Index)
	}
	for _, src := range []string{"s3://out1/sharded", "s3://out1/sharded/model.safetensors.index.json"} {
		code, out, errs = runCLI(t, "verify", fx+"training.pt", src)
		if code != exitOK || !strings.Contains(out, "OK") {
			t.Fatalf("verify %s: %d %s %s", src, code, out, errs)
		}
	}
	if n := pendingUploads(t, "out1"); n != 0 {
		t.Fatalf("%d pending uploads", n)
	}
}

// A failed upload (the index refused by a policy after the shards went
// in) leaves nothing: no shard, no pending multipart upload.
func TestConvertToS3FailureLeavesNothing(t *testing.T) {
	s := sharedMinio(t)
	if err := s.MakeBucket("out2"); err != nil {
		t.Fatal(err)
	}
	policy := `{"Version":"2012-10-17","Statement":[
 {"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::out2","arn:aws:s3:::out2/*"]},
 {"Effect":"Deny","Action":["s3:PutObject"],"Resource":["arn:aws:s3:::out2/run/model.safetensors.index.json"]}]}`
	c, err := credentials.NewSTSAssumeRole(s.Endpoint, credentials.STSAssumeRoleOptions{AccessKey: s.AccessKey, SecretKey: s.SecretKey, Policy: policy, Location: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.GetWithContext(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", v.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", v.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", v.SessionToken)
	code, out, errs := runCLI(t, "convert", "--max-shard-size", "100B", fx+"training.pt", "s3://out2/run/model.safetensors.index.json")
	if code != exitError || !strings.Contains(errs, "access denied") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q, want one line: access denied", code, errs)
	}
	t.Log(errs)
	if strings.Contains(out+errs, v.SecretAccessKey) || strings.Contains(out+errs, v.SessionToken) {
		t.Fatal("a secret in the output")
	}
	if keys := objectKeys(t, "out2"); len(keys) != 0 {
		t.Fatalf("objects left behind: %v", keys)
	}
	if n := pendingUploads(t, "out2"); n != 0 {
		t.Fatalf("%d pending uploads left behind", n)
	}
}
