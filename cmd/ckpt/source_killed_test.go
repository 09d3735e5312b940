package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

// TestConvertToS3Interrupted runs the real binary converting a large file
// to s3:// and signals it once its multipart upload is under way. After
// SIGINT nothing is left in the bucket: no object, no pending upload.
// After SIGKILL the process could not abort its upload; no object
// appears, and the next convert of the same key aborts what was left
// pending, so once it is done the bucket holds the object and no pending
// upload.
func TestConvertToS3Interrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and uploads 1 GB")
	}
	s := sharedMinio(t)
	if err := s.MakeBucket("out4"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := buildCLI(t)
	in := filepath.Join(dir, "big.pt")
	bigCheckpoint(t, in, 512<<20)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGKILL} {
		key := "run/" + strings.ToLower(sig.String()) + ".safetensors"
		url := "s3://out4/" + key
		cmd := exec.Command(bin, "convert", in, url)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for pendingUploads(t, "out4") == 0 {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("%s: no multipart upload started", sig)
			}
			time.Sleep(2 * time.Millisecond)
		}
		cmd.Process.Signal(sig)
		if err := cmd.Wait(); err == nil {
			t.Fatalf("%s: convert finished before the signal; use a larger input", sig)
		}
		if _, err := s.Client.StatObject(context.Background(), "out4", key, minio.StatObjectOptions{}); err == nil {
			t.Errorf("%s: the object exists after the signal", sig)
		}
		switch sig {
		case syscall.SIGINT:
			if n := pendingUploads(t, "out4"); n != 0 || !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("SIGINT: %d pending uploads, stderr %q", n, stderr.String())
			}
		case syscall.SIGKILL:
			if n := pendingUploads(t, "out4"); n == 0 {
				t.Log("SIGKILL: no upload left pending (killed between parts)")
			}
			out, err := exec.Command(bin, "convert", in, url).CombinedOutput()
			if err != nil {
				t.Fatalf("convert after SIGKILL: %v\n%s", err, out)
			}
			if _, err := s.Client.StatObject(context.Background(), "out4", key, minio.StatObjectOptions{}); err != nil {
				t.Errorf("convert after SIGKILL: no object: %v", err)
			}
			if n := pendingUploads(t, "out4"); n != 0 {
				t.Errorf("convert after SIGKILL left %d pending uploads: the killed one was not aborted", n)
			}
		}
	}
}
