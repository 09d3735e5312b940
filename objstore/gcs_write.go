package objstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Writing to GCS: uploads in one request, resumable uploads and compose.

// gcsChunkAlign is the multiple of bytes that every chunk of a resumable
// upload but the last must be.
const gcsChunkAlign = 256 << 10

// upload writes the object name in one request (uploadType=media) with
// the concatenation of parts as its bytes; mustNotExist makes the server
// refuse it when the object exists (ifGenerationMatch=0, HTTP 412).
func (b *gcsBackend) upload(ctx context.Context, name string, parts [][]byte, mustNotExist bool) error {
	q := url.Values{"uploadType": {"media"}, "name": {name}}
	if mustNotExist {
		q.Set("ifGenerationMatch", "0")
	}
	body, n := gcsBody(parts, 0)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.bucketURL("/upload", q), body)
	if err != nil {
		return err
	}
	if n == 0 {
		req.Body = http.NoBody
	}
	req.ContentLength = n
	req.Header.Set("Content-Type", octetStream)
	var o gcsObject
	if err := b.call(req, gcsUploadOp, &o); err != nil {
		return err
	}
	if int64(o.Size) != n {
		return fmt.Errorf("%w: the server stored %d bytes of %d", errGCSAnswer, o.Size, n)
	}
	return nil
}

// compose writes dst as the concatenation of the objects srcs, refused
// when dst exists and mustNotExist (ifGenerationMatch=0, HTTP 412).
func (b *gcsBackend) compose(ctx context.Context, dst string, srcs []string, mustNotExist bool) error {
	type source struct {
		Name string `json:"name"`
	}
	var body struct {
		Kind          string   `json:"kind"`
		SourceObjects []source `json:"sourceObjects"`
		Destination   struct {
			Bucket      string `json:"bucket"`
			ContentType string `json:"contentType"`
		} `json:"destination"`
	}
	body.Kind = "storage#composeRequest"
	for _, s := range srcs {
		body.SourceObjects = append(body.SourceObjects, source{s})
	}
	body.Destination.Bucket, body.Destination.ContentType = b.bucket, octetStream
	js, _ := json.Marshal(body)
	var q url.Values
	if mustNotExist {
		q = url.Values{"ifGenerationMatch": {"0"}}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.objectURL(dst, "/compose", q), strings.NewReader(string(js)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return b.call(req, gcsObjectOp, nil)
}

// gcsUpload is one resumable upload (a session): chunks go up in order,
// each but the last a multiple of gcsChunkAlign bytes; bytes past the
// last multiple wait in carry for the next chunk.
type gcsUpload struct {
	b     *gcsBackend
	name  string
	uri   string // the session; "" until started
	off   int64  // bytes the server holds
	carry []byte
}

// start opens the session (uploadType=resumable). The session's URL comes
// from the server (Location); it is taken on the JSON API's own scheme and
// host whatever host it names, so that the credentials go nowhere else.
func (u *gcsUpload) start(ctx context.Context) error {
	q := url.Values{"uploadType": {"resumable"}, "name": {u.name}}
	js, _ := json.Marshal(map[string]string{"name": u.name, "contentType": octetStream})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.b.bucketURL("/upload", q), strings.NewReader(string(js)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json; charset=UTF-8")
	req.Header.Set("X-Upload-Content-Type", octetStream)
	resp, err := u.b.send(req, gcsUploadOp, http.StatusOK, http.StatusCreated)
	if err != nil {
		return err
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Path == "" || len(resp.Header.Get("Location")) > 8*maxKeyBytes {
		return fmt.Errorf("%w: no session URL (Location) for a resumable upload", errGCSAnswer)
	}
	u.uri = u.b.base + loc.EscapedPath()
	if loc.RawQuery != "" {
		u.uri += "?" + loc.RawQuery
	}
	return nil
}

// chunk returns the bytes of the next chunk: carry and p, cut to a
// multiple of gcsChunkAlign unless final (nil when that is no byte), and
// the bytes of p left over.
func (u *gcsUpload) chunk(p []byte, final bool) ([][]byte, []byte) {
	if final {
		return [][]byte{u.carry, p}, nil
	}
	n := (len(u.carry) + len(p)) / gcsChunkAlign * gcsChunkAlign
	if n <= len(u.carry) {
		return nil, p
	}
	k := n - len(u.carry)
	return [][]byte{u.carry, p[:k]}, p[k:]
}

// keep adds rest to carry (copied: the caller reuses its buffer), after
// carry went up in a chunk when sent.
func (u *gcsUpload) keep(rest []byte, sent bool) {
	if sent {
		u.carry = u.carry[:0]
	}
	u.carry = append(u.carry, rest...)
}

// put sends parts, the chunk at base in the object (the last chunk when
// final), from u.off, what the server holds: a chunk the server kept
// only in part goes on from there. A failure is left to the caller to
// retry: the rest of the chunk is sent again from u.off, as Google's
// client does (GCS keeps what it held).
func (u *gcsUpload) put(ctx context.Context, parts [][]byte, base int64, final bool) error {
	var size int64
	for _, p := range parts {
		size += int64(len(p))
	}
	end := base + size // the chunk's end in the object
	if u.off < base || u.off > end {
		return fmt.Errorf("%w: the upload holds %d bytes, outside the chunk at %d-%d", errGCSAnswer, u.off, base, end)
	}
	for {
		body, n := gcsBody(parts, u.off-base)
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.uri, body)
		if err != nil {
			return err
		}
		if n == 0 {
			req.Body = http.NoBody
		}
		req.ContentLength = n
		switch {
		case final && n == 0:
			req.Header.Set("Content-Range", fmt.Sprintf("bytes */%d", end))
		case final:
			req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", u.off, end-1, end))
		default:
			req.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/*", u.off, end-1))
		}
		req.Header.Set("Content-Type", octetStream)
		// GCS answers "incomplete" with 308, a redirect to Go's client:
		// this asks for 200 and X-Http-Status-Code-Override: 308.
		req.Header.Set("X-GUploader-No-308", "yes")
		resp, err := u.b.send(req, gcsUploadOp, http.StatusOK, http.StatusCreated, http.StatusPermanentRedirect)
		if err != nil {
			return err
		}
		incomplete := resp.StatusCode == http.StatusPermanentRedirect || resp.Header.Get("X-Http-Status-Code-Override") == "308"
		if !incomplete {
			if !final {
				resp.Body.Close()
				return fmt.Errorf("%w: the upload ended at %d bytes, before its last chunk", errGCSAnswer, end)
			}
			var o gcsObject
			err := readJSON(resp.Body, gcsMetaMax, &o)
			resp.Body.Close()
			if err == nil && int64(o.Size) != end {
				err = fmt.Errorf("%w: the server stored %d bytes of %d", errGCSAnswer, o.Size, end)
			}
			u.off = end
			return err
		}
		resp.Body.Close()
		held, ok := gcsHeld(resp.Header.Get("Range"))
		switch {
		case !ok || held < u.off || held > end:
			return fmt.Errorf("%w: the server holds bytes 0-%d of an upload sent up to %d (Range %.60q)", errGCSAnswer, held-1, end, resp.Header.Get("Range"))
		case held == end && !final:
			u.off = end
			return nil
		case held == u.off:
			// Nothing kept: the caller's retry sends it again.
			return &transientError{msg: fmt.Sprintf("the server kept none of the chunk at %d", u.off)}
		}
		u.off = held // kept in part: the rest goes now
	}
}

// gcsHeld parses the Range of an incomplete upload's answer ("bytes=0-N":
// N+1 bytes held; none: 0).
func gcsHeld(h string) (int64, bool) {
	if h == "" {
		return 0, true
	}
	var last int64
	if _, err := fmt.Sscanf(h, "bytes=0-%d", &last); err != nil || last < 0 {
		return 0, false
	}
	return last + 1, true
}

// cancel ends the session (best effort; GCS drops a session after a week).
func (u *gcsUpload) cancel(ctx context.Context) {
	if u.uri == "" {
		return
	}
	ctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.uri, nil); err == nil {
		if resp, err := u.b.hc.Do(req); err == nil {
			resp.Body.Close()
		}
	}
	u.uri = ""
}

// gcsSink writes a body temporary object with a resumable upload and a
// head temporary object, composed into the key at commit.
type gcsSink struct {
	s       *Store
	b       *gcsBackend
	key     string
	replace bool
	tmp     string // the temporaries' name, less ".head" or ".body"

	body    *gcsUpload
	hasBody bool // the body object exists (or may)
	hasHead bool
}

// gcsTempInfix marks the temporary objects of a key: KEY + infix +
// random + ".head" or ".body".
const gcsTempInfix = ".ckpt-tmp-"

func newGCSSink(s *Store, b *gcsBackend, key string, replace bool) *gcsSink {
	return &gcsSink{s: s, b: b, key: key, replace: replace, tmp: key + gcsTempInfix + randomToken()}
}

func (k *gcsSink) parallel() bool { return false }

// begin deletes the temporaries a killed writer of the key left.
func (k *gcsSink) begin(ctx context.Context) error {
	var stale []string
	err := k.s.do("write", k.key, func(context.Context) error {
		stale = stale[:0]
		lctx, _ := k.s.withListBudget(ctx)
		return k.b.listPages(lctx, k.key+gcsTempInfix, "", func(name string) error {
			rest := strings.TrimPrefix(name, k.key+gcsTempInfix)
			if strings.HasSuffix(rest, ".head") || strings.HasSuffix(rest, ".body") {
				stale = append(stale, name)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, name := range stale {
		k.s.do("write", name, func(context.Context) error { return k.b.remove(ctx, name) })
	}
	return nil
}

// put sends part i of the body: the parts come one at a time, in order.
func (k *gcsSink) put(ctx context.Context, i int, p []byte) error {
	if k.body == nil {
		k.body = &gcsUpload{b: k.b, name: k.tmp + ".body"}
		k.hasBody = true
		if err := k.s.do("write", k.key, k.body.start); err != nil {
			return err
		}
	}
	parts, rest := k.body.chunk(p, false)
	if parts != nil {
		base := k.body.off
		err := k.s.do("write", k.key, func(context.Context) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return k.body.put(ctx, parts, base, false)
		})
		if err != nil {
			return err
		}
	}
	k.body.keep(rest, parts != nil)
	return nil
}

// finish ends the body's upload and writes the head.
func (k *gcsSink) finish(ctx context.Context, held [][]byte) error {
	if k.body != nil {
		parts, _ := k.body.chunk(nil, true)
		base := k.body.off
		err := k.s.do("write", k.key, func(context.Context) error { return k.body.put(ctx, parts, base, true) })
		if err != nil {
			return err
		}
		k.body = nil // finished: nothing to cancel
	}
	if len(held) == 0 {
		return nil
	}
	k.hasHead = true
	return k.s.do("write", k.key, func(context.Context) error {
		return k.b.upload(ctx, k.tmp+".head", held, false)
	})
}

func (k *gcsSink) commit(ctx context.Context, n int) error {
	var srcs []string
	if k.hasHead {
		srcs = append(srcs, k.tmp+".head")
	}
	if k.hasBody {
		srcs = append(srcs, k.tmp+".body")
	}
	if !k.replace {
		// The condition (ifGenerationMatch=0) is GCS's guard; an emulator
		// may ignore it on a compose, so the key is looked at first too.
		if ok, err := k.s.Exists(ctx, k.key); err != nil || ok {
			if err == nil {
				err = &Error{Op: "write", URL: k.b.url(k.key), Err: ErrExists}
			}
			return err
		}
	}
	err := existsErr(k.s.do("write", k.key, func(context.Context) error {
		return k.b.compose(ctx, k.key, srcs, !k.replace)
	}))
	if err == nil {
		k.removeTemps(context.WithoutCancel(ctx))
	}
	return err
}

func (k *gcsSink) single(ctx context.Context, p []byte) error {
	k.begin(ctx) // best effort: the temporaries a killed writer left
	return existsErr(k.s.do("write", k.key, func(context.Context) error {
		return k.b.upload(ctx, k.key, [][]byte{p}, !k.replace)
	}))
}

func (k *gcsSink) abort(ctx context.Context) {
	if k.body != nil {
		k.body.cancel(ctx)
		k.body = nil
	}
	k.removeTemps(ctx)
}

// removeTemps deletes the temporary objects (best effort).
func (k *gcsSink) removeTemps(ctx context.Context) {
	for _, t := range []struct {
		ok   bool
		name string
	}{{k.hasHead, k.tmp + ".head"}, {k.hasBody, k.tmp + ".body"}} {
		if t.ok {
			retryAbort(func() error {
				err := k.b.remove(ctx, t.name)
				var ge *gcsError
				if errors.As(err, &ge) && ge.code == http.StatusNotFound {
					return nil
				}
				return err
			})
		}
	}
	k.hasHead, k.hasBody = false, false
}
