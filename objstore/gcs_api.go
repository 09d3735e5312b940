package objstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The JSON API's requests: URLs, answers read with bounds, error bodies.

// Bounds of what a GCS answer may make the client read.
const (
	gcsErrorBodyMax = 64 << 10 // an error's body: its message is in the first bytes
	gcsMetaMax      = 1 << 20  // an object's metadata (stat, upload, compose)
	gcsMessageMax   = 200      // the server's message kept in an error
)

// gcsEscape escapes s as one segment of a URL path: every byte but the
// unreserved characters of RFC 3986 (letters, digits, "-._~") is
// percent-encoded, "/" included, as Google's client does for an object
// name; a name holding "?", "#", "%", "+" or spaces names itself.
func gcsEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// bucketURL returns the URL of the bucket's objects: under
// /storage/v1 (root "") or /upload/storage/v1 (root "/upload").
func (b *gcsBackend) bucketURL(root string, q url.Values) string {
	u := b.base + root + "/storage/v1/b/" + gcsEscape(b.bucket) + "/o"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// objectURL returns the URL of the object name, with suffix ("/compose"
// or "") and the query q.
func (b *gcsBackend) objectURL(name, suffix string, q url.Values) string {
	u := b.base + "/storage/v1/b/" + gcsEscape(b.bucket) + "/o/" + gcsEscape(name) + suffix
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// send makes the request and returns the response when its status is one
// of ok; any other is a *gcsError carrying the server's message, read
// from at most gcsErrorBodyMax bytes of the body, which is closed.
func (b *gcsBackend) send(req *http.Request, op gcsOp, ok ...int) (*http.Response, error) {
	req.Header.Set("User-Agent", "ckpt")
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if slices.Contains(ok, resp.StatusCode) {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, gcsErrorBodyMax))
	return nil, &gcsError{code: resp.StatusCode, msg: gcsMessage(body), op: op}
}

// gcsMessage returns the message of a JSON API error body
// ({"error":{"code":404,"message":"..."}}) in one line, bounded and with
// control characters escaped; "" when the body is not one.
func gcsMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	m := strings.Join(strings.Fields(e.Error.Message), " ")
	if len(m) > gcsMessageMax {
		m = m[:gcsMessageMax] + "..."
	}
	q := strconv.QuoteToGraphic(m)
	return q[1 : len(q)-1]
}

// call makes a request that answers 200 (or 204) with the JSON of v (nil:
// the answer is not read).
func (b *gcsBackend) call(req *http.Request, op gcsOp, v any) error {
	resp, err := b.send(req, op, http.StatusOK, http.StatusNoContent)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if v == nil {
		return nil
	}
	return readJSON(resp.Body, gcsMetaMax, v)
}

// readJSON decodes the JSON of body into v, reading at most max bytes.
func readJSON(body io.Reader, max int64, v any) error {
	data, err := io.ReadAll(io.LimitReader(body, max+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > max {
		return fmt.Errorf("%w: an answer of more than %d bytes", ErrLimit, max)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", errGCSAnswer, err)
	}
	return nil
}

// gcsObject is the part of an object's metadata the client reads.
type gcsObject struct {
	Name       string `json:"name"`
	Size       gcsInt `json:"size"`
	Generation gcsInt `json:"generation"`
}

// gcsInt is an int64 of the JSON API: a string ("123"), or a number from a
// server that writes it so.
type gcsInt int64

func (n *gcsInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" {
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("not an integer: %.40q", b)
	}
	*n = gcsInt(v)
	return nil
}

// listPages calls fn with the name of every object under prefix, page
// after page (subdirectories, with a delimiter, are skipped). The pages
// and their bytes are bounded by the listing budget of ctx.
func (b *gcsBackend) listPages(ctx context.Context, prefix, delim string, fn func(name string) error) error {
	budget := listBudgetOf(ctx)
	token := ""
	for {
		q := url.Values{"prefix": {prefix}, "fields": {"items(name),prefixes,nextPageToken"}}
		if delim != "" {
			q.Set("delimiter", delim)
		}
		if token != "" {
			q.Set("pageToken", token)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.bucketURL("", q), nil)
		if err != nil {
			return err
		}
		resp, err := b.send(req, gcsListOp, http.StatusOK)
		if err != nil {
			return err
		}
		var page struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			Next string `json:"nextPageToken"`
		}
		err = readJSON(resp.Body, budget.pageBytes, &page)
		resp.Body.Close()
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if err := fn(it.Name); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		if len(page.Next) > maxKeyBytes {
			return fmt.Errorf("%w: a page token of %d bytes", ErrLimit, len(page.Next))
		}
		token = page.Next
	}
}

// gcsBody returns a request body that reads the concatenation of parts
// from byte skip on, and its length.
func gcsBody(parts [][]byte, skip int64) (io.Reader, int64) {
	rs := make([]io.Reader, 0, len(parts))
	var n int64
	for _, p := range parts {
		if skip >= int64(len(p)) {
			skip -= int64(len(p))
			continue
		}
		rs = append(rs, bytes.NewReader(p[skip:]))
		n += int64(len(p)) - skip
		skip = 0
	}
	return io.MultiReader(rs...), n
}
