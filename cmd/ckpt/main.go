// Command ckpt reads, inspects, remaps, converts and uploads PyTorch checkpoints without Python.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], newStreams(os.Stdin, os.Stdout, os.Stderr))
	stop()
	os.Exit(code)
}
