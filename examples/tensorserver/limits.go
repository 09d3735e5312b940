package main

import (
	"net"
	"sync"
	"time"
)

// Server limits. A tensor's response is written in pieces of writePiece
// bytes, each with its own deadline (writePieceTimeout), so that a large
// tensor goes to a slow but steady reader while a reader that stops
// reading is dropped.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second // the whole request (GETs have no body)
	writeTimeout      = 60 * time.Second // a metadata response; tensors: per piece
	writePiece        = 1 << 20
	writePieceTimeout = 60 * time.Second
	defaultIdle       = 60 * time.Second // a keep-alive connection with no request
	maxHeaderBytes    = 64 << 10
	defaultMaxConns   = 256 // connections open at once; more wait to be accepted
)

// limitListener accepts at most n connections open at once: Accept waits
// until one of them is closed.
type limitListener struct {
	net.Listener
	sem       chan struct{}
	done      chan struct{} // closed by Close: a waiting Accept gives up
	closeOnce sync.Once
}

func newLimitListener(l net.Listener, n int) *limitListener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitConn gives its slot back once, on the first Close.
type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
