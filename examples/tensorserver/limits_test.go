package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// startServer runs the service with extra flags and returns its address.
func startServer(t *testing.T, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer
	args := append(append([]string{"-addr", "127.0.0.1:0"}, flags...), "../../testdata/fixtures/zip_basic.pt")
	go func() { done <- run(ctx, args, &logs, ready) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case addr := <-ready:
		return addr.String()
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("not listening after 30 s")
	}
	return ""
}

// An idle keep-alive connection is closed by the server (before the fix
// it stayed open for ever: the read below ran into the test's own
// deadline instead of EOF).
func TestIdleConnectionClosed(t *testing.T) {
	addr := startServer(t, "-idle-timeout", "100ms")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /tensors HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("%s, close %v: want a kept-alive 200", resp.Status, resp.Close)
	}
	// A safety bound far above the idle timeout, not a timing assertion.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = br.ReadByte()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the idle connection is still open after 20 s")
	}
	if err != io.EOF {
		t.Fatalf("got %v, want EOF (closed by the server)", err)
	}
}

// A request whose headers exceed the limit is refused.
func TestHeaderLimit(t *testing.T) {
	addr := startServer(t)
	req, _ := http.NewRequest("GET", "http://"+addr+"/tensors", nil)
	req.Header.Set("X-Big", string(bytes.Repeat([]byte("a"), 2*maxHeaderBytes)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("%s, want 431", resp.Status)
	}
}

// The listener holds at most n connections: Accept waits for one to
// close, and Close ends a waiting Accept.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newLimitListener(inner, 1)
	defer l.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	select {
	case <-accepted:
		t.Fatal("a second connection was accepted while the first is open")
	case <-time.After(50 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close gives back nothing more
	second, ok := <-accepted
	if !ok {
		t.Fatal("Accept failed after the first connection closed")
	}
	second.Close()
	if len(l.sem) != 0 {
		t.Fatalf("%d slots held after every connection closed", len(l.sem))
	}
	go func() { time.Sleep(10 * time.Millisecond); l.Close() }()
	l.sem <- struct{}{} // full
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed full listener: %v", err)
	}
}
