// Package miniotest runs a real MinIO server for tests: started on
// 127.0.0.1 with a random port, a temporary data directory and random
// credentials, stopped when the test (or TestMain) is done.
//
// The minio binary is found as $CKPT_MINIO, on $PATH, or in $HOME/go/bin
// (where `go install github.com/minio/minio@...` puts it). Without it the
// test is skipped, unless CKPT_REQUIRE_MINIO=1 (as in CI), which makes it
// fail.
package miniotest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ckpt-dev/ckpt/internal/testproc"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Server is a running MinIO server.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Addr      string // 127.0.0.1:PORT
	AccessKey string
	SecretKey string
	Client    *minio.Client // an admin client for setting up fixtures
	Core      *minio.Core

	*testproc.Proc // Stop, and Kill (a fault in a test)
}

// Binary returns the path of the minio binary ($CKPT_MINIO, else on $PATH
// or in $HOME/go/bin), or "" when there is none.
func Binary() string {
	if p := os.Getenv("CKPT_MINIO"); p != "" {
		return p
	}
	return testproc.Binary("minio")
}

// ErrNoBinary is returned by Start when there is no minio binary.
var ErrNoBinary = errors.New("miniotest: no minio binary (set CKPT_MINIO, or go install github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c)")

// Required reports whether CKPT_REQUIRE_MINIO asks for the server.
func Required() bool { return os.Getenv("CKPT_REQUIRE_MINIO") == "1" }

// New starts a server for t and stops it at t's cleanup; it skips t when
// there is no binary (fails under CKPT_REQUIRE_MINIO=1).
func New(t TB) *Server {
	t.Helper()
	s, err := Start()
	if errors.Is(err, ErrNoBinary) && !Required() {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TB is the part of testing.TB that New uses (this package is
// imported by tests only, but keeps "testing" out of its API).
type TB interface {
	Helper()
	Skip(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// Start starts a server; the caller must Stop it.
func Start() (*Server, error) {
	bin := Binary()
	if bin == "" {
		return nil, ErrNoBinary
	}
	dir, err := os.MkdirTemp("", "miniotest-*")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := start(bin, dir)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func start(bin, dir string) (*Server, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	cport, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Addr:      "127.0.0.1:" + strconv.Itoa(port),
		AccessKey: "ak" + testproc.Random(8),
		SecretKey: "sk" + testproc.Random(16),
	}
	s.Endpoint = "http://" + s.Addr
	args := []string{"server", "--quiet", "--address", s.Addr, "--console-address", "127.0.0.1:" + strconv.Itoa(cport), filepath.Join(dir, "data")}
	env := []string{"MINIO_ROOT_USER=" + s.AccessKey, "MINIO_ROOT_PASSWORD=" + s.SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1", "HOME=" + dir}
	s.Proc, err = testproc.Start(dir, bin, args, env, func() bool {
		resp, err := http.Get(s.Endpoint + "/minio/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if err != nil {
		return nil, err
	}
	s.Client, err = minio.New(s.Addr, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""), Region: "us-east-1"})
	if err != nil {
		s.Kill()
		return nil, err
	}
	s.Core = &minio.Core{Client: s.Client}
	return s, nil
}

// MakeBucket creates a bucket (and fails the setup if it cannot).
func (s *Server) MakeBucket(name string) error {
	return s.Client.MakeBucket(context.Background(), name, minio.MakeBucketOptions{Region: "us-east-1"})
}

// Env returns the standard AWS environment variables that point a client
// at this server.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":     s.AccessKey,
		"AWS_SECRET_ACCESS_KEY": s.SecretKey,
		"AWS_ENDPOINT_URL":      s.Endpoint,
		"AWS_REGION":            "us-east-1",
	}
}

// SetEnv sets Env() for the test (t.Setenv, restored afterwards).
func (s *Server) SetEnv(t interface{ Setenv(k, v string) }) {
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	// Never ask an instance-metadata endpoint (169.254.169.254) for a
	// role: tests touch loopback only, also when a case clears the keys.
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
}
