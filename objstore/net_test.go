package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ckpt-dev/ckpt/internal/hostileserver"
)

// fakeS3 points the S3 client at a server of the test's own (anonymous,
// path-style).
func fakeS3(t *testing.T, h http.Handler) *hostileserver.Server {
	s := hostileserver.New(t, h)
	setEnv(t, hostileserver.S3Env(s.URL, t.TempDir()+"/none"))
	return s
}

// fakeGCS points the GCS client at a server of the test's own (as an
// emulator: no credentials).
func fakeGCS(t *testing.T, h http.Handler) *hostileserver.Server {
	s := hostileserver.New(t, h)
	setEnv(t, hostileserver.GCSEnv(s.URL))
	return s
}

// fakeAzure points the Azure client at a server of the test's own.
func fakeAzure(t *testing.T, h http.Handler) *hostileserver.Server {
	s := hostileserver.New(t, h)
	setEnv(t, hostileserver.AzureEnv(s.URL))
	return s
}

// objectServers start a server of the test's own that serves the object
// they return the URL of: over https:// and as s3://.
var objectServers = []struct {
	name string
	url  func(t *testing.T, h http.Handler) (string, *hostileserver.Server)
}{
	{"https", func(t *testing.T, h http.Handler) (string, *hostileserver.Server) {
		s := hostileserver.New(t, h)
		return s.URL + "/m.bin", s
	}},
	{"s3", func(t *testing.T, h http.Handler) (string, *hostileserver.Server) {
		return "s3://bucket/m.bin", fakeS3(t, h)
	}},
}

func setEnv(t *testing.T, env map[string]string) {
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// Item 8: a redirect to the cloud metadata address is refused, on every
// backend that follows redirects (before the fix, the client went
// there).
func TestRedirectToMetadataRefused(t *testing.T) {
	for _, target := range []string{"http://169.254.169.254/latest/meta-data/iam/", "https://169.254.169.254/latest/meta-data/iam/"} {
		meta := func(r *http.Request) string { return target }
		for _, c := range []struct {
			name string
			url  func(t *testing.T) string
		}{
			{"https", func(t *testing.T) string {
				return hostileserver.New(t, hostileserver.Redirect(http.StatusFound, meta)).URL + "/m.safetensors"
			}},
			{"gs", func(t *testing.T) string {
				fakeGCS(t, hostileserver.Redirect(http.StatusFound, meta))
				return "gs://bucket/m.safetensors"
			}},
			{"az", func(t *testing.T) string {
				fakeAzure(t, hostileserver.Redirect(http.StatusTemporaryRedirect, meta))
				return "az://container/m.safetensors"
			}},
		} {
			t.Run(c.name+"/"+strings.SplitN(target, ":", 2)[0], func(t *testing.T) {
				st, key, err := NewStore(context.Background(), c.url(t), WithRetries(0, time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				_, err = st.Open(key)
				if !errors.Is(err, ErrRedirect) || !strings.Contains(err.Error(), "169.254.169.254") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("got %v, want one line: redirect to 169.254.169.254 refused", err)
				}
				if strings.HasPrefix(target, "https") && !strings.Contains(err.Error(), "link-local") {
					t.Fatalf("got %v, want the link-local address refused", err)
				}
			})
		}
	}
}

// Item 8: redirects within the origin are followed, at most five; a
// redirect to another origin over plain http is refused.
func TestRedirectLimits(t *testing.T) {
	data := []byte("0123456789")
	other := hostileserver.New(t, hostileserver.RangeFile(data))
	s := hostileserver.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/hop%d", &n)
		switch {
		case r.URL.Path == "/k":
			hostileserver.RangeFile(data)(w, r)
		case r.URL.Path == "/away":
			http.Redirect(w, r, other.URL+"/k", http.StatusFound)
		case n > 0:
			http.Redirect(w, r, fmt.Sprintf("/hop%d", n-1), http.StatusFound)
		default:
			http.Redirect(w, r, "/k", http.StatusFound)
		}
	}))
	open := func(key string) error {
		st, k, err := NewStore(context.Background(), s.URL+"/"+key, WithRetries(0, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		o, err := st.Open(k)
		if err == nil {
			o.Close()
		}
		return err
	}
	if err := open("hop4"); err != nil { // 5 redirects
		t.Fatalf("5 redirects within the origin: %v", err)
	}
	if err := open("hop5"); !errors.Is(err, ErrRedirect) { // 6 (Go's client follows 10)
		t.Fatalf("6 redirects: got %v, want ErrRedirect", err)
	}
	if err := open("away"); !errors.Is(err, ErrRedirect) || !strings.Contains(err.Error(), "only https") {
		t.Fatalf("http to another origin: got %v, want ErrRedirect", err)
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("the other origin got %d requests", n)
	}
}

// Item 8: the policy itself, on addresses that need no network: classes
// of addresses, and credentials never sent to another host.
func TestCheckRedirect(t *testing.T) {
	req := func(raw string, h ...string) *http.Request {
		r, err := http.NewRequest("GET", raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(h); i += 2 {
			r.Header.Set(h[i], h[i+1])
		}
		return r
	}
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"https://93.184.216.34/m", "https://169.254.169.254/x", false},
		{"https://93.184.216.34/m", "https://10.1.2.3/x", false},
		{"https://93.184.216.34/m", "https://127.0.0.1/x", false},
		{"https://93.184.216.34/m", "https://[::1]/x", false},
		{"https://93.184.216.34/m", "https://[fe80::1]/x", false},
		{"https://93.184.216.34/m", "https://[::ffff:169.254.169.254]/x", false},
		{"https://93.184.216.34/m", "https://100.100.100.200/x", false},
		{"https://93.184.216.34/m", "https://localhost/x", false},
		{"https://93.184.216.34/m", "http://93.184.216.35/x", false},
		{"https://93.184.216.34/m", "http://93.184.216.34/x", false}, // a downgrade is another origin
		{"https://93.184.216.34/m", "https://93.184.216.35/x", true},
		{"http://127.0.0.1:9000/m", "http://127.0.0.1:9000/y", true}, // same origin
		{"http://127.0.0.1:9000/m", "http://127.0.0.1:9001/y", false},
		{"http://127.0.0.1:9000/m", "https://127.0.0.2:9443/y", true}, // local stays local
		{"http://127.0.0.1:9000/m", "https://10.0.0.1/y", true},
		{"http://127.0.0.1:9000/m", "https://169.254.169.254/y", false},
		{"https://169.254.10.10/m", "https://169.254.169.254/y", true},
	} {
		err := checkRedirect(req(c.to), []*http.Request{req(c.from)})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrRedirect)) {
			t.Errorf("%s -> %s: %v, want allowed %v", c.from, c.to, err, c.ok)
		}
	}
	via := []*http.Request{req("https://93.184.216.34/m?sv=2024&sig=c2VjcmV0LXNpZ25hdHVyZQ&x=1")}
	next := req("https://93.184.216.35/x?sig=c2VjcmV0LXNpZ25hdHVyZQ&keep=yes", "Authorization", "AWS4 secret",
		"X-Amz-Security-Token", "tok", "x-ms-version", "2024", "X-Goog-User-Project", "p", "Cookie", "c", "Range", "bytes=0-1")
	if err := checkRedirect(next, via); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization", "X-Amz-Security-Token", "X-Ms-Version", "X-Goog-User-Project", "Cookie"} {
		if next.Header.Get(h) != "" {
			t.Errorf("%s sent to another host", h)
		}
	}
	if p, _ := http.ProxyFromEnvironment(next); p == nil {
		if c, ok := next.Context().Value(dialClassKey{}).(int); !ok || c != classPublic {
			t.Errorf("the redirected request may connect to class %v, want public only", c)
		}
	}
	if next.Header.Get("Range") == "" || next.URL.Query().Get("keep") != "yes" || next.URL.Query().Get("sig") != "" {
		t.Errorf("after the redirect: %v %s", next.Header, next.URL)
	}
	same := req("https://93.184.216.34/y", "Authorization", "AWS4 secret")
	if err := checkRedirect(same, via); err != nil || same.Header.Get("Authorization") == "" {
		t.Errorf("same host: %v, Authorization %q", err, same.Header.Get("Authorization"))
	}
	long := make([]*http.Request, maxRedirects+1)
	for i := range long {
		long[i] = req("https://93.184.216.34/m")
	}
	if err := checkRedirect(req("https://93.184.216.34/n"), long); !errors.Is(err, ErrRedirect) {
		t.Errorf("redirect %d: %v", len(long)+1, err)
	}
}

// Item 9: a body that trickles (a byte every 100 ms) is abandoned after
// the idle timeout, retried, then a one-line error; before the fix the
// read waited for every byte.
func TestIdleBodyTimeout(t *testing.T) {
	data := make([]byte, 200)
	for _, c := range objectServers {
		t.Run(c.name, func(t *testing.T) {
			u, s := c.url(t, hostileserver.Trickle(data, 100*time.Millisecond))
			st, key, err := NewStore(context.Background(), u, WithRetries(2, time.Millisecond), WithIdleTimeout(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, err = st.Open(key)
			if err == nil || !strings.Contains(err.Error(), "sent nothing for 20ms") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want the idle timeout", err)
			}
			if n := len(s.Requests()); n != 3 {
				t.Fatalf("%d requests, want 3 (retried twice)", n)
			}
		})
	}
}

// The idle timeout counts only the server's silence: a read that gets a
// byte now and then within it goes on, and its environment variable sets
// the default.
func TestIdleTimeoutSettings(t *testing.T) {
	t.Setenv(EnvIdleTimeout, "3m")
	if c := defaultConfig(); c.idle != 3*time.Minute {
		t.Fatalf("%s=3m: %v", EnvIdleTimeout, c.idle)
	}
	t.Setenv(EnvIdleTimeout, "nonsense")
	if c := defaultConfig(); c.idle != DefaultIdleTimeout {
		t.Fatalf("%s=nonsense: %v", EnvIdleTimeout, c.idle)
	}
	data := []byte("abcdef")
	s := hostileserver.New(t, hostileserver.Trickle(data, time.Millisecond))
	_, obj := openObject(t, s.URL+"/m.bin", WithIdleTimeout(10*time.Second))
	got := make([]byte, len(data))
	if _, err := obj.ReadAt(got, 0); err != nil || string(got) != string(data) {
		t.Fatalf("%q, %v", got, err)
	}
}

// listLimits sets small listing limits for a test.
func listLimits(pages, names int, pageBytes int64) Option {
	return func(c *config) { c.listPages, c.listNames, c.listPageBytes = pages, names, pageBytes }
}

// Item 10: a listing is bounded in pages, names, name length and bytes.
// Before the fix, each of these listings succeeded (the endless one after
// the server gave up at page 1000).
func TestS3ListBounded(t *testing.T) {
	for _, c := range []struct {
		name string
		page func(n int64, r *http.Request) ([]string, bool)
		want string
	}{
		{"endless", func(n int64, r *http.Request) ([]string, bool) { return nil, n < 1000 }, "past 20 pages"},
		{"big key", func(n int64, r *http.Request) ([]string, bool) {
			return []string{"d/" + strings.Repeat("k", 4<<20)}, false
		}, "larger than 1048576 bytes"},
		{"long key", func(n int64, r *http.Request) ([]string, bool) {
			return []string{"d/" + strings.Repeat("k", maxKeyBytes+1)}, false
		}, "an object name of 4097 bytes"},
		{"many names", func(n int64, r *http.Request) ([]string, bool) {
			keys := make([]string, 7)
			for i := range keys {
				keys[i] = fmt.Sprintf("d/k%d-%d", n, i)
			}
			return keys, n < 1000
		}, "more than 50 objects"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := fakeS3(t, hostileserver.S3List(c.page))
			st, _, err := NewStore(context.Background(), "s3://bucket/d/", WithRetries(0, time.Millisecond), listLimits(20, 50, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			names, err := st.List("d")
			if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %d names, %v; want %q", len(names), err, c.want)
			}
			n := len(s.Requests())
			if n > 21 {
				t.Fatalf("%d requests after the limit", n)
			}
			// Issue #34 item 6: the failed listing is the Store's answer,
			// not listed again.
			if _, again := st.List("d/"); again == nil || again.Error() != err.Error() || len(s.Requests()) != n {
				t.Fatalf("listed again: %v, %d requests after %d", again, len(s.Requests()), n)
			}
		})
	}
	t.Run("within bounds", func(t *testing.T) {
		fakeS3(t, hostileserver.S3List(func(n int64, r *http.Request) ([]string, bool) {
			return []string{fmt.Sprintf("d/k%d", n), "d/sub/"}, n < 3
		}))
		st, _, _ := NewStore(context.Background(), "s3://bucket/d/", listLimits(20, 50, 1<<20))
		names, err := st.List("d")
		if err != nil || strings.Join(names, ",") != "k1,k2,k3" {
			t.Fatalf("%q, %v", names, err)
		}
	})
}

// Item 10: cancelling the Store's context ends a listing whose next page
// stalls (before the fix, the listing's requests ignored the context and
// the listing returned the names once the server gave up).
func TestS3ListCancel(t *testing.T) {
	fakeS3(t, hostileserver.S3List(func(n int64, r *http.Request) ([]string, bool) {
		if n > 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return nil, false
		}
		return []string{"d/a"}, true
	}))
	ctx, cancel := context.WithCancel(context.Background())
	st, _, _ := NewStore(ctx, "s3://bucket/d/", WithRetries(0, time.Millisecond))
	time.AfterFunc(100*time.Millisecond, cancel)
	names, err := st.List("d")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %q, %v; want context.Canceled", names, err)
	}
}

// Item 11: a name from a file is one object: "?" and "#" are escaped,
// not a query or a fragment, and a name that decodes to a path is
// refused before any request.
func TestKeyEscaping(t *testing.T) {
	data := []byte("0123456789")
	s := hostileserver.New(t, hostileserver.RangeFile(data))
	st, _, err := NewStore(context.Background(), s.URL+"/dir/model.safetensors.index.json")
	if err != nil {
		t.Fatal(err)
	}
	o, err := st.Open(Join("dir/model.safetensors.index.json", "x.safetensors?#"))
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	reqs := s.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/dir/x.safetensors?#" || reqs[0].URI != "/dir/x.safetensors%3F%23" {
		t.Fatalf("requests %+v, want one for /dir/x.safetensors%%3F%%23", reqs)
	}
	for _, name := range []string{"%2e%2e%2fsecret.safetensors", "%2E%2E", "..%5csecret", `a\b.safetensors`, "%2e", "a%2fb"} {
		key := Join("dir/model.safetensors.index.json", name)
		_, err := st.Open(key)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("%s: got %v, want ErrBadURL naming it", name, err)
		}
		if _, err := st.IsDir(key); !errors.Is(err, ErrBadURL) {
			t.Errorf("IsDir %s: %v", name, err)
		}
	}
	if n := len(s.Requests()); n != 1 {
		t.Fatalf("%d requests: a refused name was requested", n)
	}
	if u := st.URL("a b/c%d"); !strings.HasSuffix(u, "/a%20b/c%25d") {
		t.Errorf("URL: %s", u)
	}
}

// Item 10 for gs:// and az://: a listing that always says "more to come"
// stops at the page limit, and one with too many names at the name limit
// (before the fix, both read every page the server gave, 1000 here).
func TestCloudListBounded(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T, h http.Handler) *hostileserver.Server
		url   string
		list  func(hostileserver.ListPage) http.HandlerFunc
	}{
		{"gs", fakeGCS, "gs://bucket/d/", hostileserver.GCSList},
		{"az", fakeAzure, "az://container/d/", hostileserver.AzureList},
	} {
		for _, lim := range []struct {
			name  string
			names int
			want  string
		}{{"endless", 0, "past 20 pages"}, {"many names", 7, "more than 50 objects"}} {
			t.Run(c.name+"/"+lim.name, func(t *testing.T) {
				s := c.start(t, c.list(hostileserver.Endless(lim.names)))
				st, _, err := NewStore(context.Background(), c.url, WithRetries(0, time.Millisecond), listLimits(20, 50, 1<<20))
				if err != nil {
					t.Fatal(err)
				}
				names, err := st.List("d")
				if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), lim.want) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("got %d names, %v; want %q", len(names), err, lim.want)
				}
				if k := len(s.Requests()); k > 21 {
					t.Fatalf("%d requests after the limit", k)
				}
			})
		}
	}
}

// BenchmarkGuardBody measures what the idle timer costs a body read in
// 32 KiB reads (as from a TLS or TCP connection), against the bare body.
func BenchmarkGuardBody(b *testing.B) {
	data := make([]byte, 64<<20)
	buf := make([]byte, 32<<10)
	for _, guarded := range []bool{false, true} {
		b.Run(fmt.Sprintf("guarded=%v", guarded), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var r io.ReadCloser = io.NopCloser(bytes.NewReader(data))
				if guarded {
					r = &guardBody{rc: r, cancel: func() {}, idle: DefaultIdleTimeout, speedLimit: DefaultSpeedLimit, speedTime: DefaultSpeedTime}
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
				r.Close()
			}
		})
	}
}

// Item 8 for s3://: minio-go follows no redirect at all; a redirect to
// another server is an error, and that server gets no request.
func TestS3FollowsNoRedirect(t *testing.T) {
	other := hostileserver.New(t, hostileserver.RangeFile([]byte("0123456789")))
	fakeS3(t, hostileserver.Redirect(http.StatusTemporaryRedirect, func(r *http.Request) string { return other.URL + r.URL.RequestURI() }))
	st, key, err := NewStore(context.Background(), "s3://bucket/m.bin", WithRetries(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(key); err == nil {
		t.Fatal("opened through a redirect")
	}
	if n := len(other.Requests()); n != 0 {
		t.Fatalf("the redirect's target got %d requests", n)
	}
}

// Item 8: a redirected request connects only to addresses its origin
// allows, whatever its host name resolves to at connection time (DNS
// rebinding): from a public origin, a name resolving to loopback is
// refused when dialled.
func TestDialGuarded(t *testing.T) {
	s := hostileserver.New(t, hostileserver.RangeFile([]byte("x")))
	_, port, _ := strings.Cut(strings.TrimPrefix(s.URL, "http://"), ":")
	ctx := context.WithValue(context.Background(), dialClassKey{}, classPublic)
	if c, err := dialGuarded(ctx, "tcp", "localhost:"+port); !errors.Is(err, ErrRedirect) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a redirect from a public origin dialled localhost: %v", err)
	}
	ctx = context.WithValue(context.Background(), dialClassKey{}, classPrivate)
	c, err := dialGuarded(ctx, "tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatalf("from a private origin to loopback: %v", err)
	}
	c.Close()
	c, err = dialGuarded(context.Background(), "tcp", "localhost:"+port)
	if err != nil {
		t.Fatalf("no redirect: %v", err)
	}
	c.Close()
}
