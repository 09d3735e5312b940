package main

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// streams carries the command's standard streams and whether stderr is a
// terminal (progress bars are drawn only there).
type streams struct {
	In       io.Reader
	Out      io.Writer
	Err      io.Writer
	ErrIsTTY bool
}

func newStreams(in io.Reader, out, errw io.Writer) *streams {
	s := &streams{In: in, Out: out, Err: errw}
	if f, ok := errw.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.ErrIsTTY = true
		}
	}
	return s
}

// commands lists the subcommand constructors, one file each.
var commands []func(*streams) *cobra.Command

func newRootCmd(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "ckpt",
		Short: "Read, inspect, remap, convert and upload PyTorch checkpoints without Python",
		Long: `ckpt reads PyTorch checkpoints (zip, legacy, tar, safetensors, sharded, gzip/zstd
wrapped) without Python and without running any code from the file. It shows what
is inside, on which device every tensor was saved, and plans device remapping
before a single byte is copied.

Exit codes:
  0  success
  1  unreadable, unsafe or failing input (one line on stderr)
  2  usage error
  3  ckpt scan: unknown globals found, nothing unsafe`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetIn(s.In)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	for _, mk := range commands {
		root.AddCommand(mk(s))
	}
	return root
}

func run(ctx context.Context, args []string, s *streams) int {
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return reportError(s.Err, err)
}
