package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newVersionCmd) }

// buildInfo is debug.ReadBuildInfo, replaceable in tests.
var buildInfo = debug.ReadBuildInfo

// versionString is the module version and the VCS revision the binary was
// built from: "v0.3.0", or "(devel)" for a build from a clone, then
// "revision 1a2b3c4d5e6f (modified), 2026-11-23T10:00:00Z" when the build
// recorded one (go build in a git checkout does).
func versionString() string {
	bi, ok := buildInfo()
	if !ok {
		return "unknown (no build information in the binary)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", revision " + rev
		if modified {
			v += " (modified)"
		}
		if at != "" {
			v += ", " + at
		}
	} else {
		v += ", no VCS revision recorded (built outside a git clone, or with -buildvcs=false)"
	}
	return v + ", " + runtime.Version()
}

func newVersionCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the source revision ckpt was built from",
		Long: `version prints the module version (a tagged release, or "(devel)" for a build
from a clone), the git revision and commit time recorded at build time, and
the Go version. ckpt --version prints the same line.`,
		Example: `  ckpt version
  ckpt --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(s.Out, "ckpt %s\n", versionString())
			return err
		},
	}
}
