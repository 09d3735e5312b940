package objstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/cloudemu"
)

// The emulators the package's tests share, started at first use and
// stopped by TestMain.
var (
	gcsOnce sync.Once
	gcsSrv  *cloudemu.GCS
	gcsErr  error
	azOnce  sync.Once
	azSrv   *cloudemu.Azure
	azErr   error
)

func stopEmulators() {
	if gcsSrv != nil {
		gcsSrv.Stop()
	}
	if azSrv != nil {
		azSrv.Stop()
	}
}

// cloud is one emulated backend: a fresh bucket, the environment set, and
// how to put an object.
type cloud struct {
	scheme string
	bucket string
	put    func(key string, data []byte) error
}

func (c cloud) url(key string) string { return c.scheme + "://" + c.bucket + "/" + key }

func gcsCloud(t *testing.T) cloud {
	t.Helper()
	gcsOnce.Do(func() { gcsSrv, gcsErr = cloudemu.StartGCS() })
	cloudemu.Skip(t, gcsErr)
	gcsSrv.SetEnv(t)
	bucket := fmt.Sprintf("b%d", rand.Int63())
	if err := gcsSrv.MakeBucket(bucket); err != nil {
		t.Fatal(err)
	}
	return cloud{"gs", bucket, func(k string, d []byte) error { return gcsSrv.Put(bucket, k, d) }}
}

func azCloud(t *testing.T) cloud {
	t.Helper()
	azOnce.Do(func() { azSrv, azErr = cloudemu.StartAzure() })
	cloudemu.Skip(t, azErr)
	azSrv.SetEnv(t)
	bucket := fmt.Sprintf("c%d", rand.Int63())
	if err := azSrv.MakeContainer(bucket); err != nil {
		t.Fatal(err)
	}
	return cloud{"az", bucket, func(k string, d []byte) error { return azSrv.Put(bucket, k, d) }}
}

// eachCloud runs f over every emulated backend.
func eachCloud(t *testing.T, f func(t *testing.T, c cloud)) {
	t.Run("gs", func(t *testing.T) { f(t, gcsCloud(t)) })
	t.Run("az", func(t *testing.T) { f(t, azCloud(t)) })
}

func TestCloudRead(t *testing.T) {
	eachCloud(t, func(t *testing.T, c cloud) {
		data := randomBytes(5<<20+12345, 7)
		if err := c.put("dir/obj.bin", data); err != nil {
			t.Fatal(err)
		}
		st, key, err := NewStore(context.Background(), c.url("dir/obj.bin"), WithChunkSize(1<<20), WithConcurrency(4))
		if err != nil {
			t.Fatal(err)
		}
		if key != "dir/obj.bin" {
			t.Fatalf("key %q", key)
		}
		obj, err := st.Open(key)
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		if st.Requests() != 1 {
			t.Fatalf("Open made %d requests, want 1", st.Requests())
		}
		if obj.URL() != c.url("dir/obj.bin") {
			t.Fatalf("URL %q", obj.URL())
		}
		readChecks(t, obj, data)
		if err := c.put("dir/sub/other.bin", []byte("x")); err != nil {
			t.Fatal(err)
		}
		names, err := st.List("dir")
		if err != nil || len(names) != 1 || names[0] != "obj.bin" {
			t.Fatalf("List = %v, %v", names, err)
		}
		if d, err := st.IsDir("dir"); !d || err != nil {
			t.Fatalf("IsDir(dir) = %v, %v", d, err)
		}
		if d, err := st.IsDir("dir/obj.bin"); d || err != nil {
			t.Fatalf("IsDir(dir/obj.bin) = %v, %v", d, err)
		}
	})
}

// Small objects, the empty one included: one request serves the head,
// a second the tail of a larger one.
func TestCloudSmallObjects(t *testing.T) {
	eachCloud(t, func(t *testing.T, c cloud) {
		for _, n := range []int{0, 1, 100, DefaultMetaWindow + 1} {
			data := randomBytes(n, int64(n))
			if err := c.put("o", data); err != nil {
				t.Fatal(err)
			}
			st, key, err := NewStore(context.Background(), c.url("o"))
			if err != nil {
				t.Fatal(err)
			}
			obj, err := st.Open(key)
			if err != nil {
				t.Fatalf("%d bytes: %v", n, err)
			}
			if obj.Size() != int64(n) {
				t.Fatalf("size %d, want %d", obj.Size(), n)
			}
			if n > 16 {
				tail := make([]byte, 16)
				if _, err := obj.ReadAt(tail, int64(n-16)); err != nil || string(tail) != string(data[n-16:]) {
					t.Fatalf("%d bytes: tail read %v", n, err)
				}
				want := int64(1)
				if n > DefaultMetaWindow {
					want = 2
				}
				if st.Requests() != want {
					t.Fatalf("%d bytes: %d requests, want %d", n, st.Requests(), want)
				}
			}
			readChecks(t, obj, data)
			obj.Close()
		}
	})
}

// An object replaced after Open (same size, other bytes: a new GCS
// generation, a new Azure ETag) is ErrChanged, never a mix.
func TestCloudChangedMidRead(t *testing.T) {
	eachCloud(t, func(t *testing.T, c cloud) {
		data := randomBytes(3<<20, 1)
		if err := c.put("m", data); err != nil {
			t.Fatal(err)
		}
		_, obj := openObject(t, c.url("m"), WithChunkSize(1<<20), WithRetries(0, 0))
		if err := c.put("m", randomBytes(3<<20, 2)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		_, err := obj.ReadAt(buf, 2<<20)
		if !errors.Is(err, ErrChanged) {
			t.Fatalf("read after the object was replaced: %v, want ErrChanged", err)
		}
		if !strings.Contains(err.Error(), c.url("m")) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("error %q: want one line naming the object", err)
		}
	})
}

// A missing object, a missing bucket: one-line errors naming the URL,
// matched by errors.Is.
func TestCloudErrors(t *testing.T) {
	eachCloud(t, func(t *testing.T, c cloud) {
		st, key, err := NewStore(context.Background(), c.url("nothing-here.pt"), WithRetries(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Open(key)
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing object: %v, want ErrNotFound", err)
		}
		want := "open " + c.url("nothing-here.pt") + ": no such object"
		if err.Error() != want {
			t.Fatalf("missing object: %q, want %q", err, want)
		}
		// IsDir (Open, then a listing after a miss: how ckpt.Open looks
		// a source up) tells a missing bucket.
		st, key, _ = NewStore(context.Background(), c.scheme+"://no-such-bucket/x.pt", WithRetries(0, 0))
		_, err = st.IsDir(key)
		if !errors.Is(err, ErrNoBucket) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("missing bucket: %v, want one line and ErrNoBucket", err)
		}
	})
}

// Wrong Azure credentials: ErrCredentials, and neither key appears in
// the error.
func TestAzureErrorsShowNoSecret(t *testing.T) {
	c := azCloud(t)
	if err := c.put("k", []byte("data")); err != nil {
		t.Fatal(err)
	}
	wrong := base64.StdEncoding.EncodeToString(randomBytes(64, 3))
	for _, env := range []map[string]string{
		{"AZURE_STORAGE_CONNECTION_STRING": strings.Replace(azSrv.ConnectionString(), azSrv.Key, wrong, 1)},
		{"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=" + azSrv.Account +
			";SharedAccessSignature=sv=2020-08-04&ss=b&srt=sco&sp=r&se=2030-01-01T00:00:00Z&sig=" + wrong + ";BlobEndpoint=http://" + azSrv.Addr + "/" + azSrv.Account + ";"},
	} {
		for k, v := range env {
			t.Setenv(k, v)
		}
		st, key, err := NewStore(context.Background(), c.url("k"), WithRetries(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		_, err = st.Open(key)
		if err == nil {
			t.Fatal("wrong credentials: no error")
		}
		msg := err.Error()
		if !errors.Is(err, ErrCredentials) && !errors.Is(err, ErrAccessDenied) {
			t.Errorf("wrong credentials: %q, want ErrCredentials or ErrAccessDenied", msg)
		}
		for _, s := range []string{wrong, azSrv.Key, url64(wrong)} {
			if strings.Contains(msg, s) {
				t.Errorf("error shows a secret: %q", msg)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("error spans lines: %q", msg)
		}
	}
}

func url64(s string) string {
	return strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(s)
}

// Throttling (503), dropped connections and bodies cut short are retried
// over gs:// and az:// as over s3://: the bytes come out right, with more
// requests than a clean read.
func TestCloudFaultsRetried(t *testing.T) {
	eachCloud(t, func(t *testing.T, c cloud) {
		data := randomBytes(3<<20+17, 5)
		if err := c.put("f", data); err != nil {
			t.Fatal(err)
		}
		faults := []string{"", "slowdown", "", "drop", "", "cut", "", "slowdown"}
		var target string
		if c.scheme == "gs" {
			// fake-gcs-server serves path-style reads only to requests
			// for its public host: a hop that restores the Host header.
			u, _ := url.Parse("http://" + gcsSrv.Addr)
			rp := httputil.NewSingleHostReverseProxy(u)
			hop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.Host = gcsSrv.Addr
				rp.ServeHTTP(w, r)
			}))
			t.Cleanup(hop.Close)
			target = hop.URL
		} else {
			target = "http://" + azSrv.Addr
		}
		p := newFaultProxy(t, target, func(n int64, r *http.Request) string {
			if n <= int64(len(faults)) {
				return faults[n-1]
			}
			return ""
		})
		if c.scheme == "gs" {
			t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(p.URL, "http://"))
		} else {
			t.Setenv("AZURE_STORAGE_CONNECTION_STRING", strings.Replace(azSrv.ConnectionString(), azSrv.Addr, strings.TrimPrefix(p.URL, "http://"), 1))
		}
		st, obj := openObject(t, c.url("f"), WithChunkSize(1<<20), WithDirectGetSize(1<<20), WithConcurrency(1), WithRetries(5, time.Millisecond))
		got := make([]byte, len(data))
		if _, err := obj.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("wrong bytes after retries")
		}
		if p.n.Load() < int64(len(faults)) {
			t.Fatalf("%d requests reached the proxy, want at least %d", p.n.Load(), len(faults))
		}
		t.Logf("%d requests, %d counted by the Store", p.n.Load(), st.Requests())
	})
}
