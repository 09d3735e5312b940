// Command hostload is the library side of bench/host_load.sh: it loads a
// checkpoint into host memory with one call to ckpt.Load, or reads the file
// into one buffer (the floor any loader into memory pays), and prints the
// bytes held and the time taken.
//
//	hostload ckpt FILE       ckpt.Load(ctx, FILE, ckpt.WithMapLocation("cpu"))
//	hostload ckpt-mmap FILE  the same with ckpt.WithFileMapping()
//	hostload readfile FILE   os.ReadFile(FILE)
//
// HOSTLOAD_CPUPROFILE=FILE and HOSTLOAD_BLOCKPROFILE=FILE write pprof CPU and
// block profiles of the run (go tool pprof FILE).
package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/ckpt-dev/ckpt"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: hostload ckpt|readfile FILE")
		os.Exit(2)
	}
	if p := os.Getenv("HOSTLOAD_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostload:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "hostload:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if p := os.Getenv("HOSTLOAD_BLOCKPROFILE"); p != "" {
		runtime.SetBlockProfileRate(100_000) // one event per 100 µs blocked
		defer func() {
			f, err := os.Create(p)
			if err == nil {
				err = pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "hostload:", err)
			}
		}()
	}
	start := time.Now()
	var held int64
	switch os.Args[1] {
	case "ckpt", "ckpt-mmap":
		opts := []ckpt.Option{ckpt.WithMapLocation("cpu")}
		if os.Args[1] == "ckpt-mmap" {
			opts = append(opts, ckpt.WithFileMapping())
		}
		m, err := ckpt.Load(context.Background(), os.Args[2], opts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostload:", err)
			os.Exit(1)
		}
		held = m.Host.Bytes
		// Touch one element of every tensor through a typed view, as a
		// service would, so nothing is left unread or lazily mapped.
		var sum float32
		for _, t := range m.Tensors {
			if v, err := ckpt.View[float32](t); err == nil && len(v) > 0 {
				sum += v[len(v)-1]
			}
		}
		defer m.Close()
		_ = sum
	case "readfile":
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "hostload:", err)
			os.Exit(1)
		}
		held = int64(len(b))
	default:
		fmt.Fprintln(os.Stderr, "hostload: unknown mode", os.Args[1])
		os.Exit(2)
	}
	fmt.Printf("%d bytes in %.3f s\n", held, time.Since(start).Seconds())
}
