package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/miniotest"
)

// readChecks reads obj (holding data) at random offsets and lengths and
// sequentially, and compares.
func readChecks(t *testing.T, obj *Object, data []byte) {
	t.Helper()
	if obj.Size() != int64(len(data)) {
		t.Fatalf("size %d, want %d", obj.Size(), len(data))
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 60 && len(data) > 0; i++ {
		off := rng.Int63n(int64(len(data)))
		n := rng.Intn(3 << 20)
		if i%10 == 0 {
			n = rng.Intn(100)
		}
		buf := make([]byte, n)
		k, err := obj.ReadAt(buf, off)
		want := min(int64(n), int64(len(data))-off)
		if int64(k) != want || (err != nil && err != io.EOF) || (err == io.EOF && want == int64(n)) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v; want %d", n, off, k, err, want)
		}
		if !bytes.Equal(buf[:k], data[off:off+int64(k)]) {
			t.Fatalf("ReadAt(%d, %d): wrong bytes", n, off)
		}
	}
	// Sequential, in small reads (read-ahead) and in one large one.
	var got bytes.Buffer
	if _, err := io.CopyBuffer(&got, io.NewSectionReader(obj, 0, obj.Size()), make([]byte, 100_000)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("sequential read: wrong bytes")
	}
	all := make([]byte, len(data))
	if _, err := obj.ReadAt(all, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, data) {
		t.Fatal("whole read: wrong bytes")
	}
	if k, err := obj.ReadAt(make([]byte, 1), int64(len(data))); k != 0 || err != io.EOF {
		t.Fatalf("read at the end: %d, %v", k, err)
	}
}

func TestS3Read(t *testing.T) {
	s, bucket := server(t)
	data := randomBytes(21<<20+12345, 7)
	put(t, s, bucket, "dir/obj.bin", data)
	st, key, err := NewStore(context.Background(), "s3://"+bucket+"/dir/obj.bin", WithChunkSize(1<<20), WithConcurrency(4))
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
	readChecks(t, obj, data)
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
}

// Small objects, the empty one included, and metadata reads: the first
// window serves the head, a second one the tail.
func TestS3SmallObjects(t *testing.T) {
	s, bucket := server(t)
	for _, n := range []int{0, 1, 100, DefaultMetaWindow, DefaultMetaWindow + 1, 3 * DefaultMetaWindow} {
		data := randomBytes(n, int64(n))
		put(t, s, bucket, "o", data)
		st, key, err := NewStore(context.Background(), "s3://"+bucket+"/o")
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
			if _, err := obj.ReadAt(tail, int64(n-16)); err != nil || !bytes.Equal(tail, data[n-16:]) {
				t.Fatalf("%d bytes: tail read %v", n, err)
			}
			head := make([]byte, 8)
			if _, err := obj.ReadAt(head, 0); err != nil || !bytes.Equal(head, data[:8]) {
				t.Fatalf("%d bytes: head read %v", n, err)
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
}

func TestS3Errors(t *testing.T) {
	s, bucket := server(t)
	put(t, s, bucket, "k", []byte("data"))
	open := func(u string) error {
		st, key, err := NewStore(context.Background(), u, WithRetries(1, time.Millisecond))
		if err != nil {
			return err
		}
		_, err = st.Open(key)
		return err
	}
	for _, c := range []struct {
		url  string
		want error
		env  map[string]string
	}{
		{url: "s3://" + bucket + "/missing", want: ErrNotFound},
		{url: "s3://nosuchbucket-xyz/k", want: ErrNoBucket},
		{url: "s3://" + bucket + "/k", want: ErrCredentials, env: map[string]string{"AWS_SECRET_ACCESS_KEY": "wrong-secret-1234567890"}},
		{url: "s3://" + bucket + "/k", want: ErrCredentials, env: map[string]string{"AWS_ACCESS_KEY_ID": "nosuchuser"}},
		{url: "s3://" + bucket + "/k", want: ErrNoCredentials, env: map[string]string{"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}},
		{url: "s3://" + bucket + "/k", want: ErrUnreachable, env: map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}},
		{url: "abfs://b/k", want: ErrUnsupportedScheme},
		{url: "s3://user:pass@b/k", want: ErrBadURL},
	} {
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		err := open(c.url)
		if !errors.Is(err, c.want) {
			t.Errorf("%s %v: got %v, want %v", c.url, c.env, err, c.want)
		}
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, s.SecretKey) || strings.Contains(msg, "wrong-secret") || strings.Contains(msg, "pass") || strings.Contains(msg, "\n") {
				t.Errorf("error %q shows a secret or spans lines", msg)
			}
		}
		s.SetEnv(t)
	}
}

// A bucket policy (a session policy of temporary credentials, as MinIO's
// root user is above bucket policies) denying reads gives ErrAccessDenied.
func TestS3PolicyDenied(t *testing.T) {
	s, bucket := server(t)
	put(t, s, bucket, "k", []byte("data"))
	creds, err := assumeRole(s.Endpoint, s.AccessKey, s.SecretKey, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:ListBucket"],"Resource":["arn:aws:s3:::`+bucket+`"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", creds.SessionToken)
	st, key, err := NewStore(context.Background(), "s3://"+bucket+"/k")
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Open(key)
	if !errors.Is(err, ErrAccessDenied) || errors.Is(err, ErrNoCredentials) {
		t.Fatalf("got %v, want access denied", err)
	}
	if strings.Contains(err.Error(), creds.SecretAccessKey) || strings.Contains(err.Error(), creds.SessionToken) {
		t.Fatal("secret in the error")
	}
	// The same credentials may list: the denial is the policy's.
	if _, err := st.List(""); err != nil {
		t.Fatalf("list: %v", err)
	}
}

// An object overwritten between two reads is an error, not a mix.
func TestS3OverwrittenMidRead(t *testing.T) {
	s, bucket := server(t)
	data := randomBytes(4<<20, 1)
	put(t, s, bucket, "k", data)
	st, key, _ := NewStore(context.Background(), "s3://"+bucket+"/k", WithChunkSize(1<<20))
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	put(t, s, bucket, "k", randomBytes(4<<20, 2))
	_, err = obj.ReadAt(make([]byte, 2<<20), 1<<20)
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("got %v, want ErrChanged", err)
	}
}

// objstoreGoroutines counts goroutines running this package's code, and
// returns their stacks.
func objstoreGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	c := 0
	var stacks []string
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "ckpt/objstore.(*") {
			c++
			stacks = append(stacks, g)
		}
	}
	return c, strings.Join(stacks, "\n\n")
}

// The server stopped mid-transfer: a clear error, and no goroutine left.
func TestS3ServerStopped(t *testing.T) {
	if srv == nil {
		t.Skip(miniotest.ErrNoBinary.Error())
	}
	s := newServer(t)
	s.SetEnv(t)
	s.MakeBucket("bkt")
	before, _ := objstoreGoroutines()
	data := randomBytes(16<<20, 3)
	put(t, s, "bkt", "k", data)
	st, key, _ := NewStore(context.Background(), "s3://bkt/k", WithChunkSize(1<<20), WithRetries(2, 10*time.Millisecond))
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	r := io.NewSectionReader(obj, 0, obj.Size())
	if _, err := io.CopyN(io.Discard, r, 3<<20); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	_, err = io.Copy(io.Discard, r)
	if err == nil || !errors.Is(err, ErrUnreachable) && !strings.Contains(err.Error(), "connection") {
		t.Fatalf("got %v, want a connection error", err)
	}
	if strings.Count(err.Error(), "\n") > 0 {
		t.Fatalf("error spans lines: %q", err)
	}
	obj.Close()
	noGoroutinesLeft(t, before)
}

// noGoroutinesLeft fails t unless the package's goroutines are back to
// before within 2 s: one that has returned (its WaitGroup done) may not
// have exited yet when the read that waited for it returns.
func noGoroutinesLeft(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		n, stacks := objstoreGoroutines()
		if n <= before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left:\n%s", n-before, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// https:// over Go's file server (which honours Range), and a file
// replaced mid-read.
func TestHTTPRead(t *testing.T) {
	dir := t.TempDir()
	data := randomBytes(5<<20+3, 9)
	p := filepath.Join(dir, "m.bin")
	os.WriteFile(p, data, 0o644)
	hs := httptest.NewServer(http.FileServer(http.Dir(dir)))
	defer hs.Close()
	st, key, err := NewStore(context.Background(), hs.URL+"/m.bin", WithChunkSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	readChecks(t, obj, data)
	obj.Close()

	obj, err = st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	os.WriteFile(p, randomBytes(5<<20+3, 10), 0o644)
	os.Chtimes(p, time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if _, err := obj.ReadAt(make([]byte, 1<<20), 2<<20); !errors.Is(err, ErrChanged) {
		t.Fatalf("got %v, want ErrChanged", err)
	}
	if _, err := st.Open("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

// A sequential read holds at most the read-ahead in memory, and nothing
// of the chunks it has passed.
func TestS3SequentialMemory(t *testing.T) {
	s, bucket := server(t)
	data := randomBytes(40<<20, 8)
	put(t, s, bucket, "k", data)
	st, key, _ := NewStore(context.Background(), "s3://"+bucket+"/k", WithChunkSize(1<<20), WithReadAhead(4))
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	r := io.NewSectionReader(obj, 0, obj.Size())
	buf := make([]byte, 64<<10)
	var got []byte
	peak := int64(0)
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		peak = max(peak, obj.cachedBytes())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatal("wrong bytes")
	}
	if limit := int64(4+2)<<20 + 4*DefaultMetaWindow; peak > limit {
		t.Fatalf("cache peaked at %d bytes, over %d", peak, limit)
	}
	if left := obj.cachedBytes(); left > 2<<20+DefaultMetaWindow {
		t.Fatalf("%d bytes still cached after reading through", left)
	}
	if st.Requests() > 45 {
		t.Fatalf("%d requests for 40 chunks", st.Requests())
	}
}

// Several goroutines, each streaming through its own part of one object
// (as load reads storages), get chunks and read-ahead, not metadata
// windows: about one request per chunk.
func TestS3ConcurrentStreams(t *testing.T) {
	s, bucket := server(t)
	data := randomBytes(40<<20, 9)
	put(t, s, bucket, "k", data)
	st, key, _ := NewStore(context.Background(), "s3://"+bucket+"/k", WithChunkSize(1<<20), WithReadAhead(4))
	obj, err := st.Open(key)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	const parts = 4
	errs := make(chan error, parts)
	part := int64(len(data) / parts)
	for p := int64(0); p < parts; p++ {
		go func() {
			r := io.NewSectionReader(obj, p*part+1000, part-1000)
			got := make([]byte, part-1000)
			for off := 0; off < len(got); off += 64 << 10 {
				if _, err := io.ReadFull(r, got[off:min(off+64<<10, len(got))]); err != nil {
					errs <- err
					return
				}
			}
			if !bytes.Equal(got, data[p*part+1000:(p+1)*part]) {
				errs <- errors.New("wrong bytes")
				return
			}
			errs <- nil
		}()
	}
	for range parts {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := st.Requests(); n > 40+2*parts+1 {
		t.Fatalf("%d requests for 40 chunks in %d streams", n, parts)
	}
}
