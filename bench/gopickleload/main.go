// Command gopickleload times gopickle's pytorch.Load on a file, the peer
// `ckpt inspect` is measured against in bench/inspect_bench.py. It is a
// benchmark harness only; ckpt itself never uses gopickle's pytorch package.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/nlpodyssey/gopickle/pytorch"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gopickleload FILE")
		os.Exit(2)
	}
	start := time.Now()
	if _, err := pytorch.Load(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "gopickleload:", err)
		os.Exit(1)
	}
	fmt.Printf("%.6f\n", time.Since(start).Seconds())
}
