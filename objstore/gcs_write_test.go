package objstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// strictGCS is a GCS of the test's own that holds the resumable upload
// protocol to its rules (which fake-gcs-server does not check): every
// chunk starts at or before the bytes held and within them, every chunk
// but the last is a multiple of 256 KiB. Its first chunk keeps only the
// first 256 KiB (GCS may keep less than it got, and says so in Range), and
// its session URLs name another host than its own.
type strictGCS struct {
	t         *testing.T
	mu        sync.Mutex
	objects   map[string][]byte
	sessions  map[string]*bytes.Buffer // upload_id: bytes held
	names     map[string]string        // upload_id: object name
	chunks    []string                 // Content-Range of every chunk
	partial   bool                     // the next chunk is kept in part
	badRange  bool                     // answer a chunk with a Range past it
	cancelled int                      // sessions cancelled
}

func newStrictGCS(t *testing.T) *strictGCS {
	return &strictGCS{t: t, objects: map[string][]byte{}, sessions: map[string]*bytes.Buffer{}, names: map[string]string{}, partial: true}
}

func (g *strictGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := r.URL.Query()
	obj := func(name string, n int) {
		fmt.Fprintf(w, `{"name":%q,"size":"%d","generation":"1"}`, name, n)
	}
	fail := func(code int, format string, args ...any) {
		g.t.Errorf(format, args...)
		w.WriteHeader(code)
	}
	const objs = "/storage/v1/b/bucket/o/"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/upload/storage/v1/b/bucket/o" && q.Get("uploadType") == "resumable":
		id := fmt.Sprintf("s%d", len(g.sessions))
		g.sessions[id], g.names[id] = &bytes.Buffer{}, q.Get("name")
		w.Header().Set("Location", "http://elsewhere.invalid/upload/storage/v1/b/bucket/o?uploadType=resumable&upload_id="+id)
	case r.Method == http.MethodDelete && q.Get("upload_id") != "":
		delete(g.sessions, q.Get("upload_id"))
		g.cancelled++
		w.WriteHeader(499) // GCS's answer to a cancelled session
	case r.Method == http.MethodPut && q.Get("upload_id") != "":
		held := g.sessions[q.Get("upload_id")]
		body, _ := io.ReadAll(r.Body)
		cr := r.Header.Get("Content-Range")
		g.chunks = append(g.chunks, cr)
		var start, end, total int64
		final := true
		if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &start, &end, &total); err != nil {
			final = false
			if _, err := fmt.Sscanf(cr, "bytes %d-%d/*", &start, &end); err != nil {
				fail(http.StatusBadRequest, "Content-Range %q", cr)
				return
			}
		}
		if start > int64(held.Len()) || end-start+1 != int64(len(body)) || (!final && len(body)%(256<<10) != 0) {
			fail(http.StatusBadRequest, "chunk %q of %d bytes, %d held", cr, len(body), held.Len())
			return
		}
		held.Write(body[int64(held.Len())-start:])
		if final {
			g.objects[g.names[q.Get("upload_id")]] = held.Bytes()
			obj(g.names[q.Get("upload_id")], held.Len())
			return
		}
		if g.partial {
			g.partial = false
			held.Truncate(256 << 10)
		}
		if g.badRange {
			held.Write(make([]byte, 1<<20))
		}
		if r.Header.Get("X-GUploader-No-308") != "yes" {
			fail(http.StatusBadRequest, "a chunk without X-GUploader-No-308")
			return
		}
		w.Header().Set("X-Http-Status-Code-Override", "308")
		w.Header().Set("Range", fmt.Sprintf("bytes=0-%d", held.Len()-1))
	case r.Method == http.MethodPost && r.URL.Path == "/upload/storage/v1/b/bucket/o" && q.Get("uploadType") == "media":
		body, _ := io.ReadAll(r.Body)
		g.objects[q.Get("name")] = body
		obj(q.Get("name"), len(body))
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/compose"):
		var req struct {
			SourceObjects []struct{ Name string } `json:"sourceObjects"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		dst := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, objs), "/compose")
		if _, ok := g.objects[dst]; ok && q.Get("ifGenerationMatch") == "0" {
			w.WriteHeader(http.StatusPreconditionFailed)
			return
		}
		var all []byte
		for _, s := range req.SourceObjects {
			all = append(all, g.objects[s.Name]...)
		}
		g.objects[dst] = all
		obj(dst, len(all))
	case r.Method == http.MethodGet && r.URL.Path == "/storage/v1/b/bucket/o":
		io.WriteString(w, `{"items":[]}`)
	case strings.HasPrefix(r.URL.Path, objs):
		name := strings.TrimPrefix(r.URL.Path, objs)
		data, ok := g.objects[name]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"error":{"code":404,"message":"No such object"}}`)
			return
		}
		if r.Method == http.MethodDelete {
			delete(g.objects, name)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		obj(name, len(data))
	default:
		fail(http.StatusBadRequest, "unexpected %s %s", r.Method, r.URL)
	}
}

// A Writer over the resumable upload protocol: parts that are not a
// multiple of 256 KiB go up in chunks that are (the rest carried to the
// next chunk), a chunk the server kept in part goes on from the Range it
// answered, the session's URL is taken on the endpoint's own host, and
// the object composed at Commit is the bytes written, the head rewritten
// included; the temporaries are deleted.
func TestGCSResumableUpload(t *testing.T) {
	g := newStrictGCS(t)
	fakeGCS(t, g)
	part := int64(5<<20 + 12345)
	st, key, err := NewStore(context.Background(), "gs://bucket/out.bin", WithPartSize(part), WithRetries(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Create(context.Background(), key, WithHead(100))
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(int(3*part+777), 11)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	copy(data[10:], "patched")
	if _, err := w.WriteAt([]byte("patched"), 10); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !bytes.Equal(g.objects["out.bin"], data) {
		t.Fatalf("the object holds %d bytes, not the %d written", len(g.objects["out.bin"]), len(data))
	}
	if len(g.objects) != 1 {
		t.Errorf("objects left: %d", len(g.objects))
	}
	if len(g.chunks) < 4 || !strings.HasPrefix(g.chunks[1], "bytes 262144-") {
		t.Errorf("chunks %q: the second should resume at the 256 KiB the server held", g.chunks)
	}
	t.Logf("chunks %q", g.chunks)
}

// A server that says it holds bytes past the ones sent is refused, and
// the writer leaves nothing behind: the session is cancelled.
func TestGCSResumableRangePastChunk(t *testing.T) {
	g := newStrictGCS(t)
	g.partial, g.badRange = false, true
	fakeGCS(t, g)
	st, key, err := NewStore(context.Background(), "gs://bucket/out.bin", WithRetries(0, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Create(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(randomBytes(12<<20, 12))
	err = w.Commit(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the server holds bytes 0-") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.objects) != 0 || g.cancelled != 1 {
		t.Errorf("objects left: %d, sessions cancelled: %d", len(g.objects), g.cancelled)
	}
}
