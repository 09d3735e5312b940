// Command tensorserver is an example of a Go service that ingests trained
// weights with the ckpt package: it loads a checkpoint into host memory at
// start-up with one call to ckpt.Load and serves it over HTTP.
//
//	GET /tensors         every tensor's metadata, as JSON
//	GET /tensors/{name}  a tensor's bytes: C order, little-endian, with
//	                     X-Tensor-Dtype and X-Tensor-Shape headers
//
// Connections are bounded: at most -max-conns open at once, idle
// keep-alive connections closed after -idle-timeout, request headers read
// within 10 s and limited to 64 KiB, a tensor written to a reader that
// takes at least 1 MiB a minute.
//
// It shuts down gracefully on SIGINT or SIGTERM: requests in flight finish,
// then the loaded memory is freed.
//
//	go run ./examples/tensorserver -addr 127.0.0.1:8080 testdata/fixtures/zip_basic.pt
//	curl -s 127.0.0.1:8080/tensors
//	curl -sD- 127.0.0.1:8080/tensors/encoder.bias | head
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ckpt-dev/ckpt"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "tensorserver:", err)
		os.Exit(1)
	}
}

// run loads the checkpoint named in args, serves it until ctx is done, then
// shuts down gracefully. ready, when not nil, receives the address listened
// on once requests are accepted.
func run(ctx context.Context, args []string, logw io.Writer, ready chan<- net.Addr) error {
	fs := flag.NewFlagSet("tensorserver", flag.ContinueOnError)
	fs.SetOutput(logw)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	idle := fs.Duration("idle-timeout", defaultIdle, "close a keep-alive connection after this long without a request")
	maxConns := fs.Int("max-conns", defaultMaxConns, "connections open at once (more wait to be accepted)")
	mapLocation := fs.String("map-location", "cpu", "where tensors go (torch's map_location); cpu serves every tensor")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: tensorserver [-addr HOST:PORT] [-idle-timeout D] [-max-conns N] [-map-location RULES] CHECKPOINT")
	}
	if *idle <= 0 || *maxConns <= 0 {
		return errors.New("-idle-timeout and -max-conns must be positive")
	}
	logger := log.New(logw, "tensorserver: ", log.LstdFlags)

	m, err := ckpt.Load(ctx, fs.Arg(0), ckpt.WithMapLocation(*mapLocation))
	if err != nil {
		return err
	}
	defer m.Close()
	logger.Printf("loaded %d tensors from %s", len(m.Tensors), fs.Arg(0))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ln = newLimitListener(ln, *maxConns)
	srv := &http.Server{
		Handler:           newHandler(m),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       *idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          logger,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Printf("listening on %s", ln.Addr())
	if ready != nil {
		ready <- ln.Addr()
	}

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Printf("shut down")
	return nil
}
