// Command ckpt reads, inspects, remaps, converts and uploads PyTorch checkpoints without Python.
package main

import (
	"context"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Go's net/http reports a server's misbehaviour on the standard logger
	// (such as "Unsolicited response received on idle HTTP channel
	// starting with ...", quoting the server's bytes): a second line on
	// stderr that the user cannot act on. ckpt prints its own errors, one
	// line each; nothing else in the program logs.
	log.SetOutput(io.Discard)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], newStreams(os.Stdin, os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}
