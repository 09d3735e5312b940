// Package cloudemu runs the storage emulators of Google Cloud and Azure
// for tests: fake-gcs-server (gs://) and Azurite (az://), each started on
// 127.0.0.1 with a random port and stopped when the test (or TestMain) is
// done.
//
// The binaries are found on $PATH or in $HOME/go/bin (fake-gcs-server:
// `go install github.com/fsouza/fake-gcs-server@v1.56.1`; azurite-blob:
// `npm install -g azurite`). Without them a test is skipped, unless
// CKPT_REQUIRE_CLOUD_EMU=1 (as in CI), which makes it fail.
package cloudemu

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/ckpt-dev/ckpt/internal/testproc"
)

// ErrNoBinary is returned when an emulator's binary is missing.
var ErrNoBinary = errors.New("cloudemu: no emulator binary (go install github.com/fsouza/fake-gcs-server@v1.56.1; npm install -g azurite@3.37.0)")

// Required reports whether CKPT_REQUIRE_CLOUD_EMU asks for the emulators.
func Required() bool { return os.Getenv("CKPT_REQUIRE_CLOUD_EMU") == "1" }

// TB is the part of testing.TB that the helpers use.
type TB interface {
	Helper()
	Skip(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	Setenv(k, v string)
}

// Skip skips t when err is ErrNoBinary and the emulators are not
// required, and fails it on any other error.
func Skip(t TB, err error) {
	t.Helper()
	if errors.Is(err, ErrNoBinary) && !Required() {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// GCS is a running fake-gcs-server.
type GCS struct {
	*testproc.Proc        // Stop
	Addr           string // 127.0.0.1:PORT
}

// StartGCS starts fake-gcs-server; the caller must Stop it.
func StartGCS() (*GCS, error) {
	bin := testproc.Binary("fake-gcs-server")
	if bin == "" {
		return nil, ErrNoBinary
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		dir, err := os.MkdirTemp("", "fakegcs-*")
		if err != nil {
			return nil, err
		}
		port, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		g := &GCS{Addr: "127.0.0.1:" + strconv.Itoa(port)}
		args := []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
			"-backend", "memory", "-public-host", g.Addr, "-external-url", "http://" + g.Addr, "-log-level", "error"}
		g.Proc, last = testproc.Start(dir, bin, args, nil, func() bool {
			resp, err := http.Get("http://" + g.Addr + "/storage/v1/b")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		if last == nil {
			return g, nil
		}
		os.RemoveAll(dir)
	}
	return nil, last
}

// SetEnv points the standard GCS environment at the emulator.
func (g *GCS) SetEnv(t TB) {
	t.Setenv("STORAGE_EMULATOR_HOST", g.Addr)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent")
}

func check(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("cloudemu: HTTP %d: %s", resp.StatusCode, b)
	}
	return nil
}

// MakeBucket creates a bucket.
func (g *GCS) MakeBucket(name string) error {
	body, _ := json.Marshal(map[string]string{"name": name})
	return check(http.Post("http://"+g.Addr+"/storage/v1/b", "application/json", bytes.NewReader(body)))
}

// Put creates or replaces an object (a new generation).
func (g *GCS) Put(bucket, key string, data []byte) error {
	u := "http://" + g.Addr + "/upload/storage/v1/b/" + url.PathEscape(bucket) + "/o?uploadType=media&name=" + url.QueryEscape(key)
	return check(http.Post(u, "application/octet-stream", bytes.NewReader(data)))
}

// Azure is a running Azurite blob service, with a random account and key.
type Azure struct {
	*testproc.Proc        // Stop
	Addr           string // 127.0.0.1:PORT
	Account        string
	Key            string
	Client         *azblob.Client // for setting up fixtures
}

// StartAzure starts azurite-blob; the caller must Stop it.
func StartAzure() (*Azure, error) {
	bin := testproc.Binary("azurite-blob")
	if bin == "" {
		return nil, ErrNoBinary
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		dir, err := os.MkdirTemp("", "azurite-*")
		if err != nil {
			return nil, err
		}
		port, err := testproc.FreePort()
		if err != nil {
			return nil, err
		}
		k := make([]byte, 64)
		rand.Read(k)
		a := &Azure{Addr: "127.0.0.1:" + strconv.Itoa(port),
			Account: "acct" + testproc.Random(4), Key: base64.StdEncoding.EncodeToString(k)}
		args := []string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
			"--location", dir, "--skipApiVersionCheck", "--silent", "--disableTelemetry"}
		env := []string{"AZURITE_ACCOUNTS=" + a.Account + ":" + a.Key, "HOME=" + dir}
		a.Proc, last = testproc.Start(dir, bin, args, env, func() bool {
			c, err := net.DialTimeout("tcp", a.Addr, time.Second)
			if err != nil {
				return false
			}
			c.Close()
			return true
		})
		if last == nil {
			a.Client, last = azblob.NewClientFromConnectionString(a.ConnectionString(), nil)
			if last == nil {
				return a, nil
			}
			a.Stop()
			continue
		}
		os.RemoveAll(dir)
	}
	return nil, last
}

// ConnectionString returns the connection string of the emulator's account.
func (a *Azure) ConnectionString() string {
	return "DefaultEndpointsProtocol=http;AccountName=" + a.Account + ";AccountKey=" + a.Key +
		";BlobEndpoint=http://" + a.Addr + "/" + a.Account + ";"
}

// SetEnv points the standard Azure environment at the emulator.
func (a *Azure) SetEnv(t TB) {
	t.Setenv("AZURE_STORAGE_CONNECTION_STRING", a.ConnectionString())
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	t.Setenv("AZURE_STORAGE_KEY", "")
}

// MakeContainer creates a container.
func (a *Azure) MakeContainer(name string) error {
	_, err := a.Client.CreateContainer(context.Background(), name, nil)
	return err
}

// Put creates or replaces a blob (a new ETag).
func (a *Azure) Put(container, key string, data []byte) error {
	_, err := a.Client.UploadBuffer(context.Background(), container, key, data, nil)
	return err
}
