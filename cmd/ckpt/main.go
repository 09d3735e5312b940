// Command ckpt reads, inspects, audits, remaps, converts and loads ML
// checkpoints (PyTorch zip/legacy/tar, safetensors, GGUF, DCP; local files
// and s3/gs/az/https URLs) without Python, through the root package ckpt.
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
