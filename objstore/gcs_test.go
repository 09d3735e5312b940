package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/hostileserver"
)

// The JSON API client's own work (gcs.go, gcs_api.go, gcs_write.go),
// against servers of the tests' own; the suite against fake-gcs-server
// is in cloud_test.go and write_test.go.

// gcsRange serves data as the JSON API's media download does: a 206 with
// Content-Range and the generation gen(n) of the nth request.
func gcsRange(data []byte, gen func(n int64) int64) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		var start, end int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &start, &end); err != nil || start >= int64(len(data)) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		end = min(end, int64(len(data))-1)
		w.Header().Set("X-Goog-Generation", strconv.FormatInt(gen(i), 10))
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(data[start : end+1])
	}
}

// Object names go to the server escaped as one path segment: "/" as %2F,
// and every character but letters, digits and "-._~" percent-encoded
// (the encodings below are written out by hand from RFC 3986), and
// fake-gcs-server, which decodes them, serves the object of that name.
func TestGCSNameEscaping(t *testing.T) {
	names := []struct{ name, escaped string }{
		{"dir/a b.bin", "dir%2Fa%20b.bin"},
		{"x#y?z.pt", "x%23y%3Fz.pt"},
		{"100%.bin", "100%25.bin"},
		{"c+d&e=f;g,h:i@j$k!l'm(n)o*p.bin", "c%2Bd%26e%3Df%3Bg%2Ch%3Ai%40j%24k%21l%27m%28n%29o%2Ap.bin"},
		{"modèle/日本.safetensors", "mod%C3%A8le%2F%E6%97%A5%E6%9C%AC.safetensors"},
		{"ok-._~Z9", "ok-._~Z9"},
	}
	t.Run("wire", func(t *testing.T) {
		s := fakeGCS(t, gcsRange([]byte("0123456789"), func(int64) int64 { return 7 }))
		st, _, err := NewStore(context.Background(), "gs://bucket/x", WithRetries(0, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range names {
			if _, err := st.Open(c.name); err != nil {
				t.Fatalf("%q: %v", c.name, err)
			}
		}
		reqs := s.Requests()
		for i, c := range names {
			want := "/storage/v1/b/bucket/o/" + c.escaped + "?alt=media"
			if reqs[i].URI != want {
				t.Errorf("%q: request %s, want %s", c.name, reqs[i].URI, want)
			}
		}
	})
	t.Run("fake-gcs-server", func(t *testing.T) {
		c := gcsCloud(t)
		for i, n := range names {
			if err := c.put(n.name, []byte("object "+strconv.Itoa(i))); err != nil {
				t.Fatal(err)
			}
		}
		st, _, err := NewStore(context.Background(), c.url("x"))
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range names {
			obj, err := st.Open(n.name)
			if err != nil {
				t.Fatalf("%q: %v", n.name, err)
			}
			got := make([]byte, obj.Size())
			if _, err := obj.ReadAt(got, 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if want := "object " + strconv.Itoa(i); string(got) != want {
				t.Errorf("%q: read %q, want %q", n.name, got, want)
			}
			obj.Close()
		}
		// The listing of the directory with the escaped names.
		got, err := st.List("modèle")
		if err != nil || len(got) != 1 || got[0] != "日本.safetensors" {
			t.Fatalf("List = %q, %v", got, err)
		}
	})
}

// A listing of several pages follows the page tokens, with the prefix and
// delimiter on every request, and returns the names of all the pages (not
// the subdirectories).
func TestGCSListPages(t *testing.T) {
	pages := map[string]string{
		"":     `{"items":[{"name":"d/a"},{"name":"d/b"}],"prefixes":["d/sub/"],"nextPageToken":"t 1+"}`,
		"t 1+": `{"items":[{"name":"d/c"}],"nextPageToken":"t2"}`,
		"t2":   `{"items":[{"name":"d/e"},{"name":"d/"}]}`,
	}
	s := fakeGCS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := pages[r.URL.Query().Get("pageToken")]
		if !ok || r.URL.Path != "/storage/v1/b/bucket/o" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		io.WriteString(w, p)
	}))
	st, _, err := NewStore(context.Background(), "gs://bucket/d/", WithRetries(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	names, err := st.List("d")
	if err != nil || strings.Join(names, ",") != "a,b,c,e" {
		t.Fatalf("List = %q, %v", names, err)
	}
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, tok := range []string{"", "t 1+", "t2"} {
		q := reqsQuery(t, reqs[i])
		if q.Get("prefix") != "d/" || q.Get("delimiter") != "/" || q.Get("pageToken") != tok {
			t.Errorf("request %d: %s", i, reqs[i].URI)
		}
	}
}

// An error answer with a body of 100 MB, a listing of 100 MB and object
// metadata of 100 MB are refused after a bounded read: the client's allocations stay far below
// the body, and it hangs up.
func TestGCSHugeBodiesRefused(t *testing.T) {
	const huge = 100 << 20
	stream := func(w http.ResponseWriter, code int, head string, filler byte) int64 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		n, _ := io.WriteString(w, head)
		chunk := bytes.Repeat([]byte{filler}, 64<<10)
		sent := int64(n)
		for sent < huge {
			k, err := w.Write(chunk)
			sent += int64(k)
			if err != nil {
				break
			}
		}
		return sent
	}
	for _, c := range []struct {
		name string
		h    func(w http.ResponseWriter, r *http.Request) int64
		do   func(st *Store) error
		want func(error) bool
	}{
		{"error body", func(w http.ResponseWriter, r *http.Request) int64 {
			return stream(w, http.StatusServiceUnavailable, `{"error":{"code":503,"message":"`, 'x')
		}, func(st *Store) error { _, err := st.Open("m.bin"); return err },
			func(err error) bool { return strings.Contains(err.Error(), "HTTP 503") }},
		{"listing", func(w http.ResponseWriter, r *http.Request) int64 {
			return stream(w, http.StatusOK, `{"items":[{"name":"d/`, 'y')
		}, func(st *Store) error { _, err := st.List("d"); return err },
			func(err error) bool { return errors.Is(err, ErrLimit) }},
		{"object metadata", func(w http.ResponseWriter, r *http.Request) int64 {
			return stream(w, http.StatusOK, `{"name":"`, 'z')
		}, func(st *Store) error { _, _, err := st.Size(context.Background(), "m.bin"); return err },
			func(err error) bool {
				return errors.Is(err, ErrLimit) && strings.Contains(err.Error(), "an answer of more than 1048576 bytes")
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sent atomic.Int64
			fakeGCS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sent.Add(c.h(w, r)) }))
			st, _, err := NewStore(context.Background(), "gs://bucket/d/", WithRetries(0, time.Millisecond), listLimits(20, 50, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err = c.do(st)
			runtime.ReadMemStats(&after)
			if err == nil || !c.want(err) || strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "xxxx") {
				t.Fatalf("got %v", err)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if alloc > 8<<20 {
				t.Errorf("%d MiB allocated for a refused answer", alloc>>20)
			}
			t.Logf("%d KiB allocated; the server had sent %d MiB of %d when the handler returned", alloc>>10, sent.Load()>>20, huge>>20)
		})
	}
}

// Answers that break the protocol are refused: a range that starts
// elsewhere, a range shorter than asked, the whole object to a read past
// byte 0, no generation.
func TestGCSBadAnswersRefused(t *testing.T) {
	data := randomBytes(3<<20, 3)
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"range elsewhere", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Goog-Generation", "5")
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 1-1024/%d", len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[1:1025])
		}, ErrNoRange},
		{"range short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Goog-Generation", "5")
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-99/%d", len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:100])
		}, ErrNoRange},
		{"no generation", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-%d/%d", DefaultMetaWindow-1, len(data)))
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:DefaultMetaWindow])
		}, errGCSAnswer},
	} {
		t.Run(c.name, func(t *testing.T) {
			fakeGCS(t, c.h)
			st, key, err := NewStore(context.Background(), "gs://bucket/m.bin", WithRetries(0, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Open(key)
			if err == nil || strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "open gs://bucket/m.bin: ") {
				t.Fatalf("got %v", err)
			}
			if c.want != errGCSAnswer && !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	t.Run("whole object past byte 0", func(t *testing.T) {
		var n atomic.Int64
		ranged := gcsRange(data, func(int64) int64 { return 5 })
		fakeGCS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				ranged(w, r)
				return
			}
			w.Header().Set("X-Goog-Generation", "5")
			w.Write(data)
		}))
		_, obj := openObject(t, "gs://bucket/m.bin", WithRetries(0, time.Millisecond), WithChunkSize(1<<20))
		if _, err := obj.ReadAt(make([]byte, 1<<20), 1<<20); !errors.Is(err, ErrNoRange) {
			t.Fatalf("got %v, want ErrNoRange", err)
		}
	})
}

// A generation that changes between the pieces of one read (a server
// that ignores ifGenerationMatch) is ErrChanged; every request after the
// first carries the generation of the first.
func TestGCSGenerationChangedBetweenPieces(t *testing.T) {
	data := randomBytes(4<<20, 4)
	s := fakeGCS(t, gcsRange(data, func(n int64) int64 {
		if n >= 3 {
			return 6
		}
		return 5
	}))
	_, obj := openObject(t, "gs://bucket/m.bin", WithRetries(0, time.Millisecond), WithChunkSize(1<<20), WithDirectGetSize(1<<20), WithConcurrency(1))
	_, err := obj.ReadAt(make([]byte, 3<<20), 1<<20)
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "gs://bucket/m.bin") {
		t.Fatalf("got %v, want ErrChanged", err)
	}
	reqs := s.Requests()
	if len(reqs) < 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs[1:] {
		if q := reqsQuery(t, r); q.Get("ifGenerationMatch") != "5" || r.Header.Get("Accept-Encoding") != "gzip" {
			t.Errorf("request %s (Accept-Encoding %q): want ifGenerationMatch=5 and the stored bytes", r.URI, r.Header.Get("Accept-Encoding"))
		}
	}
}

// STORAGE_EMULATOR_HOST is host:port or a URL with its scheme; anything
// else is ErrBadURL.
func TestGCSEmulatorHost(t *testing.T) {
	s := fakeGCS(t, gcsRange([]byte("abc"), func(int64) int64 { return 1 }))
	for _, v := range []string{strings.TrimPrefix(s.URL, "http://"), s.URL, s.URL + "/ignored/path"} {
		t.Setenv("STORAGE_EMULATOR_HOST", v)
		st, key, err := NewStore(context.Background(), "gs://bucket/m.bin", WithRetries(0, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if obj, err := st.Open(key); err != nil || obj.Size() != 3 {
			t.Fatalf("%s: %v", v, err)
		}
	}
	for _, v := range []string{"ftp://host:1", "http://", "http://%zz"} {
		t.Setenv("STORAGE_EMULATOR_HOST", v)
		if _, _, err := NewStore(context.Background(), "gs://bucket/m.bin"); !errors.Is(err, ErrBadURL) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v, want ErrBadURL", v, err)
		}
	}
}

// reqsQuery returns the query of a request a server saw.
func reqsQuery(t *testing.T, r hostileserver.Request) url.Values {
	t.Helper()
	u, err := url.ParseRequestURI(r.URI)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// The credentials go to the JSON API's host over https only: a request
// redirected to another host, or sent over http, goes without them.
func TestGCSAuthOnlyToItsHost(t *testing.T) {
	var authed, plain []string
	rt := &gcsAuthTransport{host: "storage.googleapis.com",
		auth: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			authed = append(authed, r.URL.String())
			return nil, io.EOF
		}),
		base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			plain = append(plain, r.URL.String())
			return nil, io.EOF
		})}
	for _, u := range []string{"https://storage.googleapis.com/storage/v1/b/x/o", "https://STORAGE.googleapis.com/x",
		"https://evil.example/x", "http://storage.googleapis.com/x", "https://storage.googleapis.com.evil.example/x", "https://storage.googleapis.com:8443/x"} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		rt.RoundTrip(req)
	}
	if len(authed) != 2 || len(plain) != 4 {
		t.Fatalf("with credentials: %q; without: %q", authed, plain)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
