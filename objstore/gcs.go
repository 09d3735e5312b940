package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// gcsBackend reads and writes a Google Cloud Storage bucket (or an
// emulator's, with STORAGE_EMULATOR_HOST) through the JSON API, with a
// client of its own over net/http (gcs_api.go): Google's Go client costs
// every command of ckpt ~17 ms of package initialisation for what is a
// handful of requests.
type gcsBackend struct {
	bucket string
	base   string // scheme://host of the JSON API
	hc     *http.Client
	anon   bool // no credentials were found
}

// gcsDefaultBase is the JSON API's host.
const gcsDefaultBase = "https://storage.googleapis.com"

// gcsScope is the OAuth scope asked of the credentials: the Store reads
// and writes objects.
const gcsScope = "https://www.googleapis.com/auth/devstorage.read_write"

// newGCS returns the backend of bucket. Credentials come from the
// standard chain (GOOGLE_APPLICATION_CREDENTIALS, external accounts and
// workload identity included, gcloud's application default credentials,
// the metadata server on Google Cloud); with STORAGE_EMULATOR_HOST set
// (host:port, or a URL with its scheme), none are used. Without
// credentials the bucket is read anonymously (public buckets).
func newGCS(ctx context.Context, bucket string, transport http.RoundTripper) (*gcsBackend, error) {
	hc := newClient(transport)
	b := &gcsBackend{bucket: bucket, base: gcsDefaultBase, hc: hc}
	if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
		base, err := gcsEmulatorBase(host)
		if err != nil {
			return nil, err
		}
		b.base = base
		return b, nil
	}
	creds, err := google.FindDefaultCredentials(ctx, gcsScope)
	if err == nil {
		u, _ := url.Parse(b.base)
		hc.Transport = &gcsAuthTransport{host: u.Host, base: transport,
			auth: &oauth2.Transport{Source: creds.TokenSource, Base: transport}}
	} else {
		b.anon = true
	}
	return b, nil
}

// gcsAuthTransport sends the requests for the JSON API's host over https
// with the credentials (auth), and any other (a redirect elsewhere)
// without them: the client's redirect policy strips the headers of a
// redirected request, but a token source below it would add them again.
type gcsAuthTransport struct {
	host       string
	auth, base http.RoundTripper
}

func (t *gcsAuthTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme == "https" && strings.EqualFold(r.URL.Host, t.host) {
		return t.auth.RoundTrip(r)
	}
	return t.base.RoundTrip(r)
}

// gcsEmulatorBase returns the scheme://host of STORAGE_EMULATOR_HOST,
// which is host:port (http) or a URL with a scheme, as Google's clients
// take it.
func gcsEmulatorBase(host string) (string, error) {
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%w: STORAGE_EMULATOR_HOST %q is not host:port nor an http(s) URL", ErrBadURL, host)
	}
	return u.Scheme + "://" + u.Host, nil
}

func (b *gcsBackend) url(key string) string { return "gs://" + b.bucket + "/" + key }

// get reads a range pinned to the generation: the server refuses a
// replaced object (ifGenerationMatch, HTTP 412), and the generation of
// the answer (x-goog-generation) is checked too (emulators may ignore the
// condition). The stored bytes are asked for, never a decompressed copy
// (Accept-Encoding: gzip stops GCS's transcoding, which would ignore the
// range). A missing bucket reads as a missing object (GCS answers both
// with 404; asking which would cost every directory open a request): the
// listing that Store.IsDir makes after a miss tells ErrNoBucket.
func (b *gcsBackend) get(ctx context.Context, key string, off int64, dst dest, ver version) (int, int64, version, error) {
	q := url.Values{"alt": {"media"}}
	if ver.gen != 0 {
		q.Set("ifGenerationMatch", strconv.FormatInt(ver.gen, 10))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.objectURL(key, "", q), nil)
	if err != nil {
		return 0, 0, ver, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+dst.n-1))
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := b.send(req, gcsObjectOp, http.StatusPartialContent, http.StatusOK, http.StatusRequestedRangeNotSatisfiable)
	if err != nil {
		return 0, 0, ver, err
	}
	defer resp.Body.Close()
	var size int64
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable:
		if off == 0 {
			// An empty object has no byte 0.
			if n, gen, err := b.attrs(ctx, key); err == nil && n == 0 {
				return 0, 0, version{gen: gen}, nil
			}
		}
		return 0, 0, ver, &gcsError{code: resp.StatusCode, op: gcsObjectOp}
	case http.StatusOK:
		// The whole object: only an answer to a read from its start.
		size = resp.ContentLength
		if off != 0 || size < 0 {
			return 0, 0, ver, fmt.Errorf("%w: the whole object (HTTP 200) in answer to a read at %d", ErrNoRange, off)
		}
	default:
		cr := resp.Header.Get("Content-Range")
		start, end, n, ok := parseContentRange(cr)
		if !ok || start != off || end != off+min(dst.n, n-off)-1 {
			return 0, 0, ver, fmt.Errorf("%w: bad Content-Range %q in answer to bytes %d-%d", ErrNoRange, cr, off, off+dst.n-1)
		}
		size = n
	}
	gen, err := strconv.ParseInt(resp.Header.Get("X-Goog-Generation"), 10, 64)
	if err != nil || gen <= 0 {
		return 0, 0, ver, fmt.Errorf("%w: the answer names no generation (x-goog-generation %q)", errGCSAnswer, resp.Header.Get("X-Goog-Generation"))
	}
	got := version{gen: gen}
	if ver.gen != 0 && got.gen != ver.gen {
		return 0, 0, ver, ErrChanged
	}
	n, err := readBody(ctx, resp.Body, dst, min(dst.n, size-off))
	return n, size, got, err
}

// attrs returns the size and generation of the object key.
func (b *gcsBackend) attrs(ctx context.Context, key string) (size, gen int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.objectURL(key, "", url.Values{"fields": {"size,generation"}}), nil)
	if err != nil {
		return 0, 0, err
	}
	var o gcsObject
	if err := b.call(req, gcsObjectOp, &o); err != nil {
		return 0, 0, err
	}
	return int64(o.Size), int64(o.Generation), nil
}

// remove deletes the object key.
func (b *gcsBackend) remove(ctx context.Context, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.objectURL(key, "", nil), nil)
	if err != nil {
		return err
	}
	return b.call(req, gcsObjectOp, nil)
}

func (b *gcsBackend) list(ctx context.Context, dir string) ([]string, error) {
	budget := listBudgetOf(ctx)
	var names []string
	err := b.listPages(ctx, dir, "/", func(name string) error {
		n := strings.TrimPrefix(name, dir)
		if n == "" {
			return nil
		}
		var err error
		names, err = budget.addName(names, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// errGCSAnswer is an answer of the server that breaks the JSON API.
var errGCSAnswer = errors.New("a malformed answer")

// gcsOp is the kind of request an error answered: a 404 means another
// thing for each.
type gcsOp int

const (
	gcsObjectOp gcsOp = iota // a read, stat, delete or compose: the object is missing
	gcsListOp                // a listing: the bucket is missing
	gcsUploadOp              // an upload: the bucket is missing if the server says so
)

// gcsError is an HTTP status of the JSON API other than the ones the
// request expects, with the server's message (one line, bounded).
type gcsError struct {
	code int
	msg  string
	op   gcsOp
}

func (e *gcsError) Error() string {
	if e.msg == "" {
		return "HTTP " + strconv.Itoa(e.code)
	}
	return "HTTP " + strconv.Itoa(e.code) + ": " + e.msg
}

// gcsCredentialsHint ends the message of a refusal without credentials.
const gcsCredentialsHint = "set GOOGLE_APPLICATION_CREDENTIALS or run gcloud auth application-default login"

// classify maps a GCS error; nil when err is not one.
func (b *gcsBackend) classify(err error) error {
	var ge *gcsError
	if !errors.As(err, &ge) {
		return nil
	}
	switch {
	case ge.code == http.StatusNotFound:
		if ge.op == gcsListOp || (ge.op == gcsUploadOp && strings.Contains(strings.ToLower(ge.msg), "bucket")) {
			return fmt.Errorf("%w %s", ErrNoBucket, b.bucket)
		}
		return ErrNotFound
	case ge.code == http.StatusUnauthorized:
		if b.anon {
			return fmt.Errorf("%w (%w: %s)", ErrAccessDenied, ErrNoCredentials, gcsCredentialsHint)
		}
		return fmt.Errorf("%w (HTTP 401)", ErrCredentials)
	case ge.code == http.StatusForbidden:
		if b.anon {
			return fmt.Errorf("%w (%w: %s)", ErrAccessDenied, ErrNoCredentials, gcsCredentialsHint)
		}
		return fmt.Errorf("%w (HTTP 403)", ErrAccessDenied)
	case ge.code == http.StatusPreconditionFailed:
		return ErrChanged
	case ge.code == http.StatusTooManyRequests || ge.code == http.StatusRequestTimeout || ge.code >= 500:
		return &transientError{msg: fmt.Sprintf("server busy or failing (HTTP %d)", ge.code)}
	}
	return fmt.Errorf("unexpected HTTP status %d", ge.code)
}
