package objstore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// httpBackend reads from a web server that honours Range requests.
type httpBackend struct {
	base   string // scheme://host
	client *http.Client
}

// url is the URL of key: each of its segments escaped, so that a name
// holding "?", "#" or "%" names an object, not a query or another path.
func (b *httpBackend) url(key string) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return b.base + "/" + strings.Join(segs, "/")
}

// httpStatusError is an unexpected HTTP status.
type httpStatusError struct{ code int }

func (e *httpStatusError) Error() string { return "HTTP " + strconv.Itoa(e.code) }

func (e *httpStatusError) mapped() error {
	switch {
	case e.code == http.StatusNotFound || e.code == http.StatusGone:
		return ErrNotFound
	case e.code == http.StatusUnauthorized || e.code == http.StatusForbidden:
		return fmt.Errorf("%w (HTTP %d)", ErrAccessDenied, e.code)
	case e.code == http.StatusPreconditionFailed:
		return ErrChanged
	case e.code == http.StatusTooManyRequests || e.code >= 500:
		return &transientError{msg: fmt.Sprintf("server busy or failing (HTTP %d)", e.code)}
	}
	return fmt.Errorf("unexpected HTTP status %d", e.code)
}

func (b *httpBackend) get(ctx context.Context, key string, off int64, dst dest, ver version) (int, int64, version, error) {
	u := b.url(key)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, 0, ver, err
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+dst.n-1))
	switch {
	case ver.etag != "":
		req.Header.Set("If-Match", ver.etag)
	case ver.modified != "":
		req.Header.Set("If-Unmodified-Since", ver.modified)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, 0, ver, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusRequestedRangeNotSatisfiable:
		if off == 0 && resp.Header.Get("Content-Range") == "bytes */0" {
			return 0, 0, version{etag: resp.Header.Get("ETag"), modified: resp.Header.Get("Last-Modified")}, nil
		}
		return 0, 0, ver, fmt.Errorf("%w: HTTP 416 at offset %d", ErrNoRange, off)
	case http.StatusOK:
		return 0, 0, ver, ErrNoRange
	default:
		return 0, 0, ver, &httpStatusError{resp.StatusCode}
	}
	got := version{etag: resp.Header.Get("ETag"), modified: resp.Header.Get("Last-Modified")}
	if (ver.etag != "" && got.etag != ver.etag) || (ver.etag == "" && ver.modified != "" && got.modified != ver.modified) {
		return 0, 0, ver, ErrChanged
	}
	start, end, size, ok := parseContentRange(resp.Header.Get("Content-Range"))
	if !ok || start != off {
		return 0, 0, ver, fmt.Errorf("%w: bad Content-Range %q", ErrNoRange, resp.Header.Get("Content-Range"))
	}
	n, err := readBody(ctx, resp.Body, dst, end-start+1)
	return n, size, got, err
}

func (b *httpBackend) list(ctx context.Context, dir string) ([]string, error) {
	return nil, ErrCannotList
}
