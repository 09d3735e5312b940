// Package hostileserver runs misbehaving web servers on 127.0.0.1 for the
// tests of the network client (objstore) and the CLI: servers that
// trickle bodies, redirect anywhere, list for ever, or send bytes nobody
// asked for. Every server listens on loopback only, answers with bounded
// bodies and stops when its test ends.
package hostileserver

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TB is the part of testing.TB that the package uses.
type TB interface {
	Helper()
	Cleanup(func())
}

// Request is what a server saw of one request.
type Request struct {
	Method string
	URI    string // as sent: escaped path and query
	Path   string // decoded
	Header http.Header
}

// maxRecorded bounds the requests a Server remembers.
const maxRecorded = 10000

// Server is an httptest.Server on 127.0.0.1 that records the requests it
// gets (the first maxRecorded).
type Server struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []Request
}

// New starts h on 127.0.0.1; it is closed when the test ends.
func New(t TB, h http.Handler) *Server {
	t.Helper()
	s := &Server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		if len(s.reqs) < maxRecorded {
			s.reqs = append(s.reqs, Request{Method: r.Method, URI: r.RequestURI, Path: r.URL.Path, Header: r.Header.Clone()})
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// Requests returns the requests seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// parseRange parses "bytes=A-B" against size: the range served.
func parseRange(h string, size int64) (start, end int64, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if !found || !strings.HasPrefix(h, "bytes=") {
		return 0, 0, false
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || start >= size || end < start {
		return 0, 0, false
	}
	return start, min(end, size-1), true
}

// header writes the head of a 206 answer to a Range request for data
// (or a 416), returning the range; ok is false when the answer is over.
func rangeHead(w http.ResponseWriter, r *http.Request, data []byte) (start, end int64, ok bool) {
	start, end, ok = parseRange(r.Header.Get("Range"), int64(len(data)))
	if !ok {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return 0, 0, false
	}
	h := w.Header()
	h.Set("ETag", `"v1"`)
	h.Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
	h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, end, len(data)))
	h.Set("Content-Length", strconv.FormatInt(end-start+1, 10))
	w.WriteHeader(http.StatusPartialContent)
	return start, end, true
}

// RangeFile serves data to Range requests, honestly, at any path.
func RangeFile(data []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if start, end, ok := rangeHead(w, r, data); ok {
			w.Write(data[start : end+1])
		}
	}
}

// Trickle answers Range requests for data with the right head, then one
// byte of the body every interval, until the client goes away or the
// range is sent.
func Trickle(data []byte, every time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start, end, ok := rangeHead(w, r, data)
		if !ok {
			return
		}
		rc := http.NewResponseController(w)
		rc.Flush()
		t := time.NewTicker(every)
		defer t.Stop()
		for i := start; i <= end; i++ {
			select {
			case <-r.Context().Done():
				return
			case <-t.C:
			}
			if _, err := w.Write(data[i : i+1]); err != nil {
				return
			}
			rc.Flush()
		}
	}
}

// Unsolicited answers Range requests for data correctly, then writes junk
// on the same connection, after the response: bytes the client never
// asked for, which Go's HTTP client reports on the standard logger
// ("Unsolicited response received on idle HTTP channel").
func Unsolicited(data []byte, junk string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start, end, ok := parseRange(r.Header.Get("Range"), int64(len(data)))
		if !ok {
			http.Error(w, "range", http.StatusRequestedRangeNotSatisfiable)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		bw := bufio.NewWriter(conn)
		fmt.Fprintf(bw, "HTTP/1.1 206 Partial Content\r\nETag: \"v1\"\r\nLast-Modified: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\n\r\n",
			start, end, len(data), end-start+1)
		bw.Write(data[start : end+1])
		bw.WriteString(junk)
		bw.Flush()
		// Hold the connection a moment so that the client, not the
		// server's close, meets the junk; then let go.
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		brw.ReadByte()
	}
}

// Redirect answers every request with a redirect (code) to the URL
// to(r) returns.
func Redirect(code int, to func(r *http.Request) string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", to(r))
		w.WriteHeader(code)
	}
}
