package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// streams carries the command's standard streams and what decides whether
// progress bars are drawn (see wantBar).
type streams struct {
	In         io.Reader
	Out        io.Writer
	Err        io.Writer
	ErrIsTTY   bool   // stderr is a terminal
	Term       string // $TERM
	NoProgress bool   // $CKPT_NO_PROGRESS is set
	Quiet      bool   // --quiet
}

func newStreams(in io.Reader, out, errw io.Writer) *streams {
	s := &streams{In: in, Out: out, Err: errw, Term: os.Getenv("TERM")}
	_, s.NoProgress = os.LookupEnv("CKPT_NO_PROGRESS")
	if f, ok := errw.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			s.ErrIsTTY = true
		}
	}
	return s
}

// command is a subcommand's name (the first word of its Use) and its
// constructor; each file registers its own in commands.
type command struct {
	name string
	mk   func(*streams) *cobra.Command
}

// commands lists the subcommands, one file each.
var commands []command

// commandsFor returns the subcommands a run with args needs built: only
// the one args name (cobra then finds and runs it as among all of them:
// the root's flags take no value, so the first argument that is not a
// flag is the command's name), none for a plain --version, and all of them
// otherwise (help, completion, an unknown or missing command, --version
// before a command's name). The root runs only when not one command is
// picked. Building a
// command tree costs every command's flags (start-up, issue 35).
func commandsFor(args []string) []command {
	version := false
	for _, a := range args {
		switch a {
		case "--version", "-v":
			version = true
			continue
		case "--quiet", "-q":
			continue
		}
		if a == "--" || strings.HasPrefix(a, "-") {
			return commands
		}
		for _, c := range commands {
			if c.name == a && !version { // cobra prints the version for `--version convert`
				return []command{c}
			}
		}
		return commands
	}
	if version {
		return nil
	}
	return commands
}

// newRootCmd builds the root command with the subcommands cmds (commands,
// or commandsFor's choice).
func newRootCmd(s *streams, cmds []command) *cobra.Command {
	root := &cobra.Command{
		Use:   "ckpt",
		Short: "Read, inspect, audit, remap, convert and load ML checkpoints without Python",
		Long: `ckpt reads machine-learning checkpoints without Python and without running any
code from them: PyTorch files (zip, legacy, tar), safetensors (sharded ones through
their index.json too), GGUF, and torch.distributed.checkpoint (DCP) directories,
plain or gzip/zstd wrapped, from local files and from s3://, gs://, az:// and
http(s):// URLs. It shows what is inside and on which device every tensor was
saved, audits the pickles for code they would run, plans device remapping before
a single byte is copied, loads into host or GPU memory with checksums, and
converts to safetensors, PyTorch zip, GGUF or DCP, locally or to s3://, gs://
and az://.

Progress bars are drawn on stderr when it is a terminal, except with --json,
--quiet, TERM=dumb (or unset) or CKPT_NO_PROGRESS set.

Exit codes:
  0  success
  1  unreadable, unsafe or failing input (one line on stderr); for ckpt scan:
     an unsafe global, or anything it could not scan in full; for ckpt diff:
     a tensor past --atol/--rtol/--min-cosine
  2  usage error
  3  ckpt scan: every file read in full, unknown globals found, nothing unsafe`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if len(cmds) != 1 {
		// Only the root itself prints the version (--version): a run of
		// one command does not need the build information parsed.
		root.Version = versionString()
	}
	root.SetVersionTemplate("ckpt {{.Version}}\n")
	root.PersistentFlags().BoolVarP(&s.Quiet, "quiet", "q", false, "draw no progress bar")
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	root.SetIn(s.In)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err: err, help: c.CommandPath()} })
	for _, c := range cmds {
		root.AddCommand(c.mk(s))
	}
	// With some commands left out, cobra's completion command (built
	// whenever there are subcommands) cannot be the one that runs.
	root.CompletionOptions.DisableDefaultCmd = len(cmds) < len(commands)
	return root
}

func run(ctx context.Context, args []string, s *streams) int {
	return runCommands(ctx, args, s, commandsFor(args))
}

// runCommands runs args on a root command holding the subcommands cmds.
func runCommands(ctx context.Context, args []string, s *streams, cmds []command) int {
	root := newRootCmd(s, cmds)
	root.SetArgs(args)
	c, err := root.ExecuteContextC(ctx)
	if err != nil && c != nil {
		err = withHelp(err, c.CommandPath())
	}
	return reportError(s.Err, err)
}

// withHelp points a usage error that names no command at the one that ran.
func withHelp(err error, path string) error {
	ue, isUsage := err.(usageError)
	switch {
	case isUsage:
		if ue.help == "" {
			ue.help = path
			return ue
		}
	case !errors.As(err, &ue) && isCobraUsage(err.Error()):
		return usageError{err: err, help: path}
	}
	return err
}
