package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ckpt-dev/ckpt/internal/par"
)

// IsURL reports whether s names an object this package reads (s3://,
// gs://, az://, https://, http://) or a scheme it knows and refuses
// (abfs://), rather than a local path.
func IsURL(s string) bool {
	i := strings.Index(s, "://")
	if i <= 0 {
		return false
	}
	switch strings.ToLower(s[:i]) {
	case "s3", "http", "https", "gs", "gcs", "az", "azblob", "abfs", "abfss":
		return true
	}
	return false
}

// version pins one version of an object.
type version struct {
	etag     string // as the server sent it
	modified string // Last-Modified, for servers without an ETag
	gen      int64  // GCS: the object's generation
}

// backend is one kind of server.
type backend interface {
	// get reads [off, off+dst.n) of key into dst (readBody), pinned to ver unless
	// it is zero, and returns how many bytes it read (fewer only at the
	// object's end), the object's size and version.
	get(ctx context.Context, key string, off int64, dst dest, ver version) (int, int64, version, error)
	// list returns the names of the objects directly under the prefix
	// dir (a key ending in "/", or "" for the root), relative to it.
	list(ctx context.Context, dir string) ([]string, error)
	// url names key for messages.
	url(key string) string
}

// Store is a bucket (s3://bucket) or a web server (https://host): the
// objects of one checkpoint and its siblings. Its methods are safe for
// concurrent use.
type Store struct {
	ctx      context.Context
	cfg      config
	b        backend
	sem      chan struct{}
	requests atomic.Int64
	s3       *s3Backend // nil for http

	bufs   sync.Pool          // chunk buffers
	pieces par.FreeList[byte] // streamed reads' buffers (ReadAtStream): a few pages touched once per Store, not per byte

	mu     sync.Mutex
	opened map[string]*Object // opened by IsDir, for the next Open
	listed map[string]listing // listings, once each: a Store sees one snapshot of a directory
}

// NewStore returns the Store that holds the object rawURL names, and the
// object's key in it. ctx bounds every request the Store makes, now and
// later (cancel it to cancel in-flight reads).
func NewStore(ctx context.Context, rawURL string, opts ...Option) (*Store, string, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", &Error{URL: redact(rawURL), Err: fmt.Errorf("%w: %v", ErrBadURL, errors.Unwrap(err))}
	}
	if u.User != nil {
		return nil, "", &Error{URL: redact(rawURL), Err: fmt.Errorf("%w: credentials in a URL are refused; use the environment", ErrBadURL)}
	}
	s := &Store{ctx: ctx, cfg: cfg, sem: make(chan struct{}, cfg.concurrency)}
	s.pieces.Max = 2 * cfg.concurrency
	transport := &guardTransport{base: &countingTransport{base: newTransport(cfg), n: &s.requests}, idle: cfg.idle,
		speedLimit: cfg.speedLimit, speedTime: cfg.speedTime}
	switch strings.ToLower(u.Scheme) {
	case "s3":
		if u.Host == "" {
			return nil, "", &Error{URL: rawURL, Err: fmt.Errorf("%w: no bucket", ErrBadURL)}
		}
		b, err := newS3(u.Host, transport)
		if err != nil {
			return nil, "", &Error{URL: rawURL, Err: err}
		}
		s.b, s.s3 = b, b
		return s, strings.TrimPrefix(u.Path, "/"), nil
	case "http", "https":
		base := *u
		base.Path, base.RawPath, base.RawQuery, base.Fragment = "", "", "", ""
		s.b = &httpBackend{base: base.String(), client: newClient(transport)}
		return s, strings.TrimPrefix(u.Path, "/"), nil
	case "gs", "gcs":
		if u.Host == "" {
			return nil, "", &Error{URL: rawURL, Err: fmt.Errorf("%w: no bucket", ErrBadURL)}
		}
		b, err := newGCS(ctx, u.Host, transport)
		if err != nil {
			return nil, "", &Error{URL: rawURL, Err: err}
		}
		s.b = b
		return s, strings.TrimPrefix(u.Path, "/"), nil
	case "az", "azblob":
		if u.Host == "" {
			return nil, "", &Error{URL: rawURL, Err: fmt.Errorf("%w: no container", ErrBadURL)}
		}
		b, err := newAzure(u.Host, transport)
		if err != nil {
			return nil, "", &Error{URL: rawURL, Err: err}
		}
		s.b = b
		return s, strings.TrimPrefix(u.Path, "/"), nil
	case "abfs", "abfss":
		return nil, "", &Error{URL: rawURL, Err: fmt.Errorf("%w %s:// (Azure blobs are read as az://container/key)", ErrUnsupportedScheme, u.Scheme)}
	}
	return nil, "", &Error{URL: rawURL, Err: fmt.Errorf("%w %q", ErrUnsupportedScheme, u.Scheme)}
}

func redact(s string) string {
	if i := strings.Index(s, "@"); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			return s[:j+3] + "REDACTED" + s[i:]
		}
	}
	return s
}

// Requests returns how many HTTP requests the Store has made (retries
// included).
func (s *Store) Requests() int64 { return s.requests.Load() }

// URL returns the URL of the object key.
func (s *Store) URL(key string) string { return s.b.url(key) }

// Join returns the key of name in the "directory" of key.
func Join(key, name string) string {
	d := path.Dir(key)
	if d == "." || d == "/" {
		return name
	}
	return d + "/" + name
}

// List returns the names of the objects directly under the prefix dir
// ("a/b" lists "a/b/..."), relative to it. A directory is listed once per
// Store, and later calls get the same answer: the same names, or the same
// error (a listing past a bound, or one that failed after its retries, is
// not listed again). A web server cannot list: ErrCannotList.
func (s *Store) List(dir string) ([]string, error) {
	if dir != "" && !strings.HasSuffix(dir, "/") {
		dir += "/"
	}
	s.mu.Lock()
	if l, ok := s.listed[dir]; ok {
		s.mu.Unlock()
		return l.names, l.err
	}
	s.mu.Unlock()
	if err := checkKey(strings.TrimSuffix(dir, "/")); dir != "" && err != nil {
		return nil, &Error{Op: "list", URL: s.b.url(dir), Err: err}
	}
	var names []string
	err := s.do("list", dir, func(ctx context.Context) error {
		var err error
		lctx, _ := s.withListBudget(ctx)
		names, err = s.b.list(lctx, dir)
		return err
	})
	if err != nil {
		names = nil
	}
	s.mu.Lock()
	if s.listed == nil {
		s.listed = make(map[string]listing)
	}
	s.listed[dir] = listing{names, err}
	s.mu.Unlock()
	return names, err
}

// listing is the answer of one directory listing.
type listing struct {
	names []string
	err   error
}

// IsDir reports whether key is a "directory": it ends in "/", is empty,
// or no object has that name but objects have it as a prefix.
func (s *Store) IsDir(key string) (bool, error) {
	if key == "" || strings.HasSuffix(key, "/") {
		return true, nil
	}
	if err := checkKey(key); err != nil {
		return false, &Error{Op: "open", URL: s.b.url(key), Err: err}
	}
	if _, ok := s.b.(*httpBackend); ok {
		return false, nil
	}
	// An object of that name makes it a file: opened now, its first
	// request is not wasted (the next Open of key takes it).
	obj, err := s.Open(key)
	if err == nil {
		s.mu.Lock()
		if s.opened == nil {
			s.opened = make(map[string]*Object)
		}
		if old := s.opened[key]; old != nil {
			old.Close()
		}
		s.opened[key] = obj
		s.mu.Unlock()
		return false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return false, err
	}
	names, err := s.List(key)
	if err != nil {
		return false, err
	}
	return len(names) > 0, nil
}

// do runs one request (fn) with the Store's concurrency bound, timeouts
// and retries, and maps its error. Retries stop at the retry count, or
// when the next would start past the retry time after the first failure.
func (s *Store) do(op, key string, fn func(ctx context.Context) error) error {
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		return &Error{Op: op, URL: s.b.url(key), Err: s.ctx.Err()}
	}
	defer func() { <-s.sem }()
	delay := s.cfg.backoff
	var failed time.Time // the first failure
	for attempt := 0; ; attempt++ {
		err := fn(s.ctx)
		if err == nil {
			return nil
		}
		if s.ctx.Err() != nil {
			return &Error{Op: op, URL: s.b.url(key), Err: s.ctx.Err()}
		}
		err = s.classify(err)
		if attempt == 0 {
			failed = time.Now()
		}
		if !retryable(err) || attempt >= s.cfg.retries {
			return &Error{Op: op, URL: s.b.url(key), Err: err}
		}
		if since := time.Since(failed); since+delay > s.cfg.retryTime {
			return &Error{Op: op, URL: s.b.url(key), Err: fmt.Errorf("%w (given up after %d attempts: no retry starts more than %v after the first failure, %s sets it)",
				err, attempt+1, s.cfg.retryTime, EnvRetryTime)}
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return &Error{Op: op, URL: s.b.url(key), Err: s.ctx.Err()}
		}
		delay *= 2
	}
}

// transientError is a throttling or transient failure worth retrying.
type transientError struct{ msg string }

func (e *transientError) Error() string { return e.msg }

func retryable(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

// classify maps a request's error to the package's errors: sentinels for
// the known causes, transientError for what may pass.
func (s *Store) classify(err error) error {
	var se *sinkError
	if errors.As(err, &se) {
		return se
	}
	if isGuardError(err) {
		return &guardError{msg: s.scrub(oneLine(err)), err: err}
	}
	if c, ok := s.b.(interface{ classify(error) error }); ok {
		if e := c.classify(err); e != nil {
			return e
		}
	}
	var he *httpStatusError
	if errors.As(err, &he) {
		return he.mapped()
	}
	if errors.Is(err, ErrChanged) || errors.Is(err, ErrNoRange) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrExists) || errors.Is(err, ErrCannotList) {
		return err
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return &transientError{msg: ErrUnreachable.Error() + ": " + s.scrub(oe.Err.Error())}
	}
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe") {
		return &transientError{msg: "connection failed: " + s.scrub(oneLine(err))}
	}
	return errors.New(s.scrub(oneLine(err)))
}

// guardError is a refusal of the redirect policy or a limit: its message,
// in one line and scrubbed, and errors.Is finding ErrRedirect or ErrLimit.
type guardError struct {
	msg string
	err error
}

func (e *guardError) Error() string { return e.msg }

func (e *guardError) Is(target error) bool {
	return (target == ErrRedirect || target == ErrLimit) && errors.Is(e.err, target)
}

// scrub removes from msg any secret the backend knows of (an Azure
// connection string's key or signature).
func (s *Store) scrub(msg string) string {
	if a, ok := s.b.(*azureBackend); ok {
		return a.scrub(msg)
	}
	return msg
}

// unreachable wraps a final dial failure so that errors.Is finds
// ErrUnreachable.
func (e *transientError) Is(target error) bool {
	return target == ErrUnreachable && strings.HasPrefix(e.msg, ErrUnreachable.Error())
}

func oneLine(err error) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	return strings.Join(strings.Fields(msg), " ")
}

// countingTransport counts requests.
type countingTransport struct {
	base http.RoundTripper
	n    *atomic.Int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.base.RoundTrip(r)
}

func newTransport(cfg config) http.RoundTripper {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialGuarded,
		MaxIdleConns:          4 * cfg.concurrency,
		MaxIdleConnsPerHost:   2 * cfg.concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: cfg.timeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
}

// landedKey is the context key of the function that readBody tells about
// each piece of dst as it fills (see Object.ReadAtPieces).
type landedKey struct{}

// withLanded returns ctx carrying fn, which readBody calls with each piece
// of dst it fills and the piece's offset in dst.
func withLanded(ctx context.Context, fn func(piece []byte, at int)) context.Context {
	return context.WithValue(ctx, landedKey{}, fn)
}

// landedPiece is how much of a body readBody reads before reporting it:
// small enough to be checked while it is in the CPU's cache (a core's L2
// holds a few of them), large enough that the calls cost nothing.
const landedPiece = 1 << 20

// readBody reads exactly n bytes of a ranged response into d (a streamed
// read's pieces go to its sink: streamBody); a body
// cut short is a transient error (the caller retries). When ctx carries a
// function (withLanded), it is called with every landedPiece of dst as the
// piece fills.
func readBody(ctx context.Context, body io.Reader, d dest, n int64) (int, error) {
	n = min(n, d.n)
	if d.sink != nil {
		return streamBody(body, d.sink, n)
	}
	if d.pull != nil {
		return pullBody(ctx, body, d.pull, n)
	}
	dst := d.buf
	landed, _ := ctx.Value(landedKey{}).(func(piece []byte, at int))
	if landed == nil {
		k, err := io.ReadFull(body, dst[:n])
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return k, err
	}
	k := 0
	for k < int(n) {
		m, err := io.ReadFull(body, dst[k:min(k+landedPiece, int(n))])
		if m > 0 && err == nil {
			landed(dst[k:k+m], k)
		}
		k += m
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return k, err
		}
	}
	return k, nil
}

// parseContentRange parses "bytes START-END/SIZE".
func parseContentRange(h string) (start, end, size int64, ok bool) {
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "bytes ") {
		return 0, 0, 0, false
	}
	if _, err := fmt.Sscanf(h[len("bytes "):], "%d-%d/%d", &start, &end, &size); err != nil {
		return 0, 0, 0, false
	}
	return start, end, size, start >= 0 && end >= start && size > end
}

// getBuf returns a buffer of n bytes: a recycled one for a whole chunk.
func (s *Store) getBuf(n int64) []byte {
	if n == s.cfg.chunk {
		if b, ok := s.bufs.Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, n)
}

// putBuf recycles a buffer that getBuf returned.
func (s *Store) putBuf(b []byte) {
	if int64(len(b)) == s.cfg.chunk {
		s.bufs.Put(&b)
	}
}
